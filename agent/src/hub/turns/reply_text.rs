//! The reply of a turn as the carrier keeps it (docs/protocol.md, "Events" and
//! "Limits"): at most `max_reply_bytes` of it, cut at a UTF-8 character boundary and
//! marked `truncated` when the agent said more. Deltas are never cut, only split: each
//! `text_delta` the carrier sends carries at most the cap, and their concatenation is exactly
//! what the agent streamed.

use carrier_protocol::envelope::truncate;

/// The reply of the running turn: a prefix of what the agent streamed, at most `cap` bytes.
#[derive(Debug)]
pub(crate) struct ReplyText {
    text: String,
    cap: usize,
    truncated: bool,
}

impl ReplyText {
    /// An empty reply holding at most `cap` bytes.
    pub(crate) fn new(cap: usize) -> Self {
        ReplyText {
            text: String::new(),
            cap,
            truncated: false,
        }
    }

    /// The cap.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Appends what of `delta` fits. Once anything did not fit nothing more is kept, so the
    /// text stays a prefix of the reply.
    pub(crate) fn push(&mut self, delta: &str) {
        if self.truncated {
            return;
        }
        let room = self.cap - self.text.len();
        let kept = truncate(delta, room);
        if kept.len() < delta.len() {
            self.truncated = true;
        }
        // Grow no further than the cap: the doubling of `push_str` could hold twice of it.
        let needed = self.text.len() + kept.len();
        if needed > self.text.capacity() {
            let target = (self.text.capacity() * 2).clamp(needed, self.cap);
            self.text.reserve_exact(target - self.text.len());
        }
        self.text.push_str(kept);
    }

    /// The reply kept and whether it was cut.
    pub(crate) fn into_parts(self) -> (String, bool) {
        (self.text, self.truncated)
    }
}

/// `text` cut to at most `cap` bytes at a character boundary, and whether it was cut.
pub(crate) fn cut(text: &str, cap: usize) -> (&str, bool) {
    let kept = truncate(text, cap);
    (kept, kept.len() < text.len())
}

/// `delta` split into pieces of at most `cap` bytes, each ending on a character boundary (a
/// character longer than `cap` travels alone). The pieces join to `delta`; an empty delta is
/// one empty piece, so the agent's every call is still one event.
pub(crate) fn pieces(delta: &str, cap: usize) -> impl Iterator<Item = &str> {
    let mut rest = Some(delta);
    std::iter::from_fn(move || {
        let current = rest?;
        if current.len() <= cap {
            rest = None;
            return Some(current);
        }
        let mut end = truncate(current, cap).len();
        if end == 0 {
            end = current.chars().next().map_or(current.len(), char::len_utf8);
        }
        let (piece, tail) = current.split_at(end);
        rest = (!tail.is_empty()).then_some(tail);
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(cap: usize, deltas: &[&str]) -> (String, bool) {
        let mut reply = ReplyText::new(cap);
        for d in deltas {
            reply.push(d);
        }
        reply.into_parts()
    }

    #[test]
    fn a_reply_at_the_cap_is_whole_and_one_byte_past_is_cut() {
        assert_eq!(kept(6, &["abc", "def"]), ("abcdef".into(), false));
        assert_eq!(kept(6, &["abc", "defg"]), ("abcdef".into(), true));
        assert_eq!(kept(6, &["abcdef", ""]), ("abcdef".into(), false));
        assert_eq!(cut("abcdef", 6), ("abcdef", false));
        assert_eq!(cut("abcdefg", 6), ("abcdef", true));
    }

    #[test]
    fn the_cut_falls_on_a_character_boundary() {
        // "é" is 2 bytes, "€" 3, "😀" 4: a cap inside one keeps the text before it.
        assert_eq!(cut("aé", 2), ("a", true));
        assert_eq!(cut("aé", 3), ("aé", false));
        assert_eq!(cut("ab€", 4), ("ab", true));
        assert_eq!(cut("😀", 3), ("", true));
        assert_eq!(kept(4, &["ab", "€"]), ("ab".into(), true));
        assert_eq!(kept(5, &["ab", "€"]), ("ab€".into(), false));
    }

    #[test]
    fn nothing_is_kept_after_the_first_cut_so_the_text_stays_a_prefix() {
        // "€" does not fit in the 2 bytes left, "x" would: it must not be appended.
        assert_eq!(kept(4, &["ab", "€", "x"]), ("ab".into(), true));
    }

    #[test]
    fn the_kept_text_never_holds_more_than_the_cap() {
        let mut reply = ReplyText::new(1000);
        for _ in 0..10_000 {
            reply.push("0123456789");
        }
        let (text, truncated) = reply.into_parts();
        assert_eq!(text.len(), 1000);
        assert!(truncated);
        assert!(text.capacity() <= 1000, "capacity {}", text.capacity());
    }

    #[test]
    fn deltas_split_on_character_boundaries_and_join_to_the_original() {
        let all: Vec<&str> = pieces("abcdefg", 3).collect();
        assert_eq!(all, ["abc", "def", "g"]);
        assert_eq!(pieces("abc", 3).collect::<Vec<_>>(), ["abc"], "at the cap");
        assert_eq!(
            pieces("abcd", 3).collect::<Vec<_>>(),
            ["abc", "d"],
            "one past"
        );
        assert_eq!(pieces("", 3).collect::<Vec<_>>(), [""]);
        let text = "a€b😀c€€";
        for cap in 1..=text.len() {
            let split: Vec<&str> = pieces(text, cap).collect();
            assert_eq!(split.concat(), text, "cap {cap}");
            for piece in &split {
                assert!(
                    piece.len() <= cap || piece.chars().count() == 1,
                    "cap {cap}: {piece:?}"
                );
            }
        }
    }
}
