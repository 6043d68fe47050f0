//! [`LineReader`]: newline-delimited lines from a pipe with a per-line byte cap. A line over
//! the cap is skipped as it streams by — never buffered whole — so a child printing one
//! endless line costs the carrier at most the cap. (Also what `carrier acp` reads an editor's
//! stdin with.)

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A line (without its `\n` or `\r\n`), valid UTF-8.
    Text(String),
    /// A line over the cap, skipped; its length in bytes.
    TooLong(usize),
    /// A line that is not UTF-8, skipped.
    NotUtf8,
}

/// Reads lines of at most a cap of bytes from a buffered reader.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    max: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    /// Lines of `inner`, each at most `max` bytes (without its line end).
    pub fn new(inner: R, max: usize) -> Self {
        LineReader {
            inner,
            max,
            buf: Vec::new(),
        }
    }

    /// The next line; `None` at end of input. A last line without `\n` still counts.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        self.buf.clear();
        let mut skipped: Option<usize> = None;
        // Each pass consumes at least one byte or returns, so the loop ends with the input.
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                if self.buf.is_empty() && skipped.is_none() {
                    return Ok(None);
                }
                break;
            }
            let (chunk_len, found) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            match &mut skipped {
                Some(n) => *n += chunk_len,
                None if self.buf.len() + chunk_len > self.max => {
                    skipped = Some(self.buf.len() + chunk_len);
                    self.buf.clear();
                }
                None => self.buf.extend_from_slice(&available[..chunk_len]),
            }
            self.inner.consume(chunk_len + usize::from(found));
            if found {
                break;
            }
        }
        if let Some(n) = skipped {
            return Ok(Some(Line::TooLong(n)));
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(Some(match std::str::from_utf8(&self.buf) {
            Ok(s) => Line::Text(s.to_owned()),
            Err(_) => Line::NotUtf8,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<Line> {
        // A tiny buffer, so lines span many reads.
        let reader = tokio::io::BufReader::with_capacity(3, input);
        let mut lines = LineReader::new(reader, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    fn text(s: &str) -> Line {
        Line::Text(s.into())
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_a_last_unterminated_one() {
        assert_eq!(
            all(b"one\ntwo\r\n\nthree", 100).await,
            [text("one"), text("two"), text(""), text("three")]
        );
        assert!(all(b"", 100).await.is_empty());
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_skipped_whole() {
        assert_eq!(
            all(b"short\n0123456789abc\nnext\n", 10).await,
            [text("short"), Line::TooLong(13), text("next")]
        );
        assert_eq!(all(b"0123456789abc", 10).await, [Line::TooLong(13)]);
        assert_eq!(all(b"0123456789\n", 10).await, [text("0123456789")]);
    }

    #[tokio::test]
    async fn invalid_utf8_is_reported_not_returned() {
        assert_eq!(
            all(b"\xff\xfe\nok\n", 10).await,
            [Line::NotUtf8, text("ok")]
        );
    }
}
