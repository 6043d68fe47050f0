//! What parsing a text message would make the client hold, bounded before it is parsed.
//!
//! Every inbound text message is parsed into a `serde_json::Value`, and that tree can take far
//! more memory than the text: each value is a 32-byte node (up to twice that in a growing
//! array), each string a heap block of its own, and each non-empty object a B-tree leaf of
//! about 640 bytes whatever it holds; a string with an escape is first decoded into a scratch
//! buffer that grows by doubling. `[0,0,0,…]` takes some 30 times its text, `[{"a":0},…]` some
//! 90 times (`client/tests/parse_bound.rs` prints each shape's figure). A server that may send
//! a 64 MiB message could so make the client hold gigabytes. [`parsed_bound`] reads the text
//! once, without allocating, and says how much parsing it can take at most; a message over the
//! client's cap is refused unparsed.

/// What one JSON node (a value, or an object's key) can take once parsed: its 32-byte `Value`
/// with the slack of a growing array's buffer, or a key's `String` and its share of the B-tree
/// leaf, plus the smallest heap block a non-empty string gets.
const NODE_BYTES: usize = 128;

/// What one object adds beyond its nodes: the B-tree leaf a non-empty map allocates (11 key
/// and value slots, about 640 bytes).
const OBJECT_BYTES: usize = 640;

/// What one array adds beyond its nodes: the first buffer a non-empty array allocates (room
/// for 4 values, a 144-byte block), which a one-value array nested in another does not fill.
const ARRAY_BYTES: usize = 144;

/// An upper bound of the heap `serde_json::from_slice::<Value>(text)` takes at its peak:
/// - the text's bytes, once (no string or number is longer parsed than written), and 1/32 more
///   for the page rounding of large blocks;
/// - twice the longest string with an escape: the scratch buffer it is decoded in (filled
///   by doubling) beside the string made from it;
/// - [`NODE_BYTES`] per node, [`OBJECT_BYTES`] per object and [`ARRAY_BYTES`] per array.
///
/// One pass, no allocation; text that is not JSON gets a figure too (parsing it then fails).
/// `client/tests/parse_bound.rs` holds it against a counting allocator for the costliest
/// shapes.
pub(crate) fn parsed_bound(text: &[u8]) -> usize {
    let shape = Shape::of(text);
    text.len()
        .saturating_add(text.len() / 32)
        .saturating_add(shape.longest_escaped.saturating_mul(2))
        .saturating_add(shape.nodes.saturating_mul(NODE_BYTES))
        .saturating_add(shape.objects.saturating_mul(OBJECT_BYTES))
        .saturating_add(shape.arrays.saturating_mul(ARRAY_BYTES))
}

/// What in a JSON text costs memory once parsed.
#[derive(Debug, Default, PartialEq, Eq)]
struct Shape {
    nodes: usize,
    objects: usize,
    arrays: usize,
    /// The length as written of the longest string that has an escape in it.
    longest_escaped: usize,
}

/// Where the scan is: in a string (since which byte, whether it has an escape, whether the
/// byte before was a backslash), in a number or literal, or between values.
enum Place {
    Between,
    Scalar,
    String {
        start: usize,
        escapes: bool,
        after_backslash: bool,
    },
}

impl Shape {
    fn of(text: &[u8]) -> Shape {
        let mut shape = Shape::default();
        let mut place = Place::Between;
        for (at, &byte) in text.iter().enumerate() {
            if let Place::String {
                start,
                escapes,
                after_backslash,
            } = &mut place
            {
                if *after_backslash {
                    *after_backslash = false;
                } else if byte == b'\\' {
                    *escapes = true;
                    *after_backslash = true;
                } else if byte == b'"' {
                    if *escapes {
                        shape.longest_escaped = shape.longest_escaped.max(at - *start);
                    }
                    place = Place::Between;
                }
                continue;
            }
            match byte {
                b'"' => {
                    shape.nodes += 1;
                    place = Place::String {
                        start: at + 1,
                        escapes: false,
                        after_backslash: false,
                    };
                }
                b'{' | b'[' => {
                    shape.nodes += 1;
                    if byte == b'{' {
                        shape.objects += 1;
                    } else {
                        shape.arrays += 1;
                    }
                    place = Place::Between;
                }
                // Numbers, `true`, `false`, `null`: one node per run of these bytes.
                b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'-' | b'+' | b'.' => {
                    if !matches!(place, Place::Scalar) {
                        shape.nodes += 1;
                        place = Place::Scalar;
                    }
                }
                _ => place = Place::Between,
            }
        }
        // A string the text ends in (not JSON, but it is measured all the same).
        if let Place::String {
            start,
            escapes: true,
            ..
        } = place
        {
            shape.longest_escaped = shape.longest_escaped.max(text.len() - start);
        }
        shape
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Shape {
        Shape::of(text.as_bytes())
    }

    fn counts(text: &str) -> (usize, usize, usize) {
        let Shape {
            nodes,
            objects,
            arrays,
            ..
        } = shape(text);
        (nodes, objects, arrays)
    }

    #[test]
    fn every_value_and_key_is_a_node_and_strings_hide_nothing() {
        assert_eq!(counts(""), (0, 0, 0));
        assert_eq!(counts("0"), (1, 0, 0));
        assert_eq!(counts("[0,-1.5e+3,true,null]"), (5, 0, 1));
        assert_eq!(counts(r#"{"a":[{},"b"]}"#), (5, 2, 1));
        // Brackets, quotes and escapes inside a string are its own bytes, not nodes.
        assert_eq!(counts(r#"["{[\"0,1\\",2]"#), (3, 0, 1));
        assert_eq!(counts(r#"{"k":"v\u0022"}"#), (3, 1, 0));
    }

    #[test]
    fn the_longest_string_with_an_escape_is_measured_as_written() {
        assert_eq!(shape(r#"["plain","a\nb","\\"]"#).longest_escaped, 4);
        assert_eq!(shape(r#"["no escapes here"]"#).longest_escaped, 0);
        assert_eq!(shape(r#"{"k\u00e9y":"\"quoted\""}"#).longest_escaped, 10);
        // Unterminated: the rest of the text.
        assert_eq!(shape(r#"["ab\n"#).longest_escaped, 4);
    }

    #[test]
    fn the_bound_adds_up_and_saturates() {
        assert_eq!(parsed_bound(b"   "), 3);
        assert_eq!(parsed_bound(b"\"x\""), 3 + NODE_BYTES);
        assert_eq!(
            parsed_bound(b"[{}]"),
            4 + 2 * NODE_BYTES + OBJECT_BYTES + ARRAY_BYTES
        );
        let escaped = br#"["\n\n"]"#;
        assert_eq!(
            parsed_bound(escaped),
            escaped.len() + 2 * 4 + 2 * NODE_BYTES + ARRAY_BYTES
        );
        let long = vec![b' '; 64];
        assert_eq!(parsed_bound(&long), 64 + 2);
    }
}
