//! RFC 3339 timestamps in UTC: a runtime file's `started` (to the second) and the Robota
//! profile's message times (to the millisecond, as JavaScript's `Date.toJSON` writes them).
//!
//! Hand-written rather than `humantime::format_rfc3339_seconds`, which panics for a clock set
//! before 1970 and fails (a panic in `to_string`) past the year 9999; this one never fails: a
//! clock before the epoch reads as the epoch, and a year past 9999 is written out in full.

use std::time::{SystemTime, UNIX_EPOCH};

/// `YYYY-MM-DDTHH:MM:SSZ` for `time` (the Unix epoch for a clock set before it).
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("{}Z", date_time(secs))
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for `ms` milliseconds since the Unix epoch.
pub fn rfc3339_millis(ms: u64) -> String {
    format!("{}.{:03}Z", date_time(ms / 1000), ms % 1000)
}

/// `YYYY-MM-DDTHH:MM:SS` for `secs` seconds since the Unix epoch.
fn date_time(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // At most u64::MAX / 86,400 days: an i64 holds it.
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap_day = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_723);
        assert_eq!(rfc3339_utc(leap_day), "2000-02-29T01:02:03Z");
        let later = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
        assert_eq!(rfc3339_utc(later), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn a_clock_before_the_epoch_reads_as_the_epoch() {
        let before = UNIX_EPOCH - Duration::from_secs(86_400);
        assert_eq!(rfc3339_utc(before), "1970-01-01T00:00:00Z");
    }
}
