//! Answers the carrier builds from data it does not bound itself — a host directory's sessions,
//! a session's history — are fitted to the connection's outbound budget before they are
//! encoded, so every such request is answered in any state instead of failing the connection
//! (docs/protocol.md, "Delivery and memory"). Sizes are counted as JSON without building it.

use serde::Serialize;

/// Room left in the budget for the envelope around a result: `{"id":…,"result":{"…":[…]}}`
/// with an id of at most 256 bytes, each of which may be escaped to six.
pub const ENVELOPE_BYTES: usize = 4096;

/// Bytes `value` takes as JSON.
pub(crate) fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Our result types cannot fail to serialize; a failure only undercounts, and the frame
    // is checked again when it is sent (`Reply::ok`).
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The leading items whose JSON array fits `budget` bytes; returns them and how many were
/// left out.
pub(crate) fn fit_front<T: Serialize>(mut items: Vec<T>, budget: usize) -> (Vec<T>, usize) {
    let keep = fitting(items.iter(), budget);
    let left_out = items.len() - keep;
    items.truncate(keep);
    (items, left_out)
}

/// The trailing (newest) items whose JSON array fits `budget` bytes, in their order; returns
/// them and how many were left out.
pub fn fit_back<T: Serialize>(mut items: Vec<T>, budget: usize) -> (Vec<T>, usize) {
    let keep = fitting(items.iter().rev(), budget);
    let left_out = items.len() - keep;
    items.drain(..left_out);
    (items, left_out)
}

/// How many of `items`, in iteration order, fit `budget` bytes as the elements of one array.
fn fitting<'a, T: Serialize + 'a>(items: impl Iterator<Item = &'a T>, budget: usize) -> usize {
    let mut used = 2; // "[]"
    let mut n = 0;
    for item in items {
        let cost = json_len(item) + usize::from(n > 0); // the comma
        if used + cost > budget {
            break;
        }
        used += cost;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_counts_escapes() {
        assert_eq!(json_len("ab"), 4);
        assert_eq!(
            json_len("\u{1}"),
            8,
            "a control character is six bytes escaped"
        );
        let value = serde_json::json!({"a": [1, "x\n"]});
        assert_eq!(json_len(&value), serde_json::to_vec(&value).unwrap().len());
    }

    #[test]
    fn an_array_at_the_budget_fits_and_one_byte_past_drops_the_last_item() {
        let items = vec!["aa".to_owned(), "bb".to_owned(), "cc".to_owned()];
        let exact = serde_json::to_vec(&items).unwrap().len(); // ["aa","bb","cc"] = 16
        assert_eq!(fit_front(items.clone(), exact), (items.clone(), 0));
        let (front, out) = fit_front(items.clone(), exact - 1);
        assert_eq!((front, out), (vec!["aa".to_owned(), "bb".to_owned()], 1));
        let (back, out) = fit_back(items.clone(), exact - 1);
        assert_eq!((back, out), (vec!["bb".to_owned(), "cc".to_owned()], 1));
        assert_eq!(fit_back(items, 1), (Vec::new(), 3));
    }
}
