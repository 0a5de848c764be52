//! Small helpers shared by the commands.

/// `rewind`'s exit status for trouble (a bad argument, a missing program, an
/// unknown run, a damaged store): every error, and clap's usage errors.
pub const TROUBLE: u8 = 2;

/// The RUN argument of the commands that take one recorded run.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArg {
    /// The run: id, unique id prefix, @, @N or name.
    #[arg(value_name = "RUN")]
    pub spec: String,
}

/// `anyhow::bail!` for an error in how the command was called.
macro_rules! usage {
    ($($t:tt)*) => {
        anyhow::bail!($($t)*)
    };
}
pub(crate) use usage;

/// The error and its causes on one line: `context: cause: cause`, without
/// repeating a cause already spelled out in the message before it.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let s = cause.to_string().replace('\n', " ");
        if out.contains(&s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&s);
    }
    out
}

/// A clap usage error on one line: its message up to the usage text.
pub fn clap_one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() {
            parts.push(line.strip_prefix("error: ").unwrap_or(line).to_string());
        }
    }
    format!("{} (see `rewind --help`)", parts.join(" "))
}

/// Seconds, briefly: `12.345` for a second or more, else up to six
/// decimals without trailing zeros (`0.00008`).
pub fn secs(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3}")
    } else {
        let t = format!("{s:.6}");
        let t = t.trim_end_matches('0').trim_end_matches('.');
        if t.is_empty() {
            "0".into()
        } else {
            t.into()
        }
    }
}

/// Parses a size: bytes, or a number with K, M, G or T (powers of 1024;
/// `KiB`, `KB`, `k` are the same).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (like 512M or 2G)"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let shift = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(format!(
                "`{s}`: unknown size unit `{unit}` (use K, M, G or T)"
            ))
        }
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// Parses seconds, fractions allowed, with an optional unit (`s`, `m`, `h`).
pub fn parse_secs(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    // `90`, `90s`, `1.5m`, `2h`.
    let (num, unit) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse::<f64>()
        .map(|v| v * unit)
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > 1e9 {
        return Err(format!("`{s}`: seconds must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(v))
}

/// A typed reply or `--json` answer as a `serde_json::Value`. Its maps are
/// ordered by key, as those `serde_json::json!` builds, so what a typed
/// answer prints is byte for byte what the `json!` it replaced printed,
/// whatever the order of its struct's fields.
pub fn json_value<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("a typed reply has string keys")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert!(parse_size("2X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn seconds() {
        assert_eq!(secs(0.00008), "0.00008");
        assert_eq!(secs(0.0), "0");
        assert_eq!(secs(0.5), "0.5");
        assert_eq!(secs(12.3456), "12.346");
        assert!(parse_secs("1.5").is_ok());
        assert_eq!(parse_secs("60s"), Ok(std::time::Duration::from_secs(60)));
        assert_eq!(parse_secs("1.5m"), Ok(std::time::Duration::from_secs(90)));
        assert!(parse_secs("m").is_err());
        assert!(parse_secs("0").is_err());
        assert!(parse_secs("x").is_err());
    }

    #[test]
    fn one_line_errors() {
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&e), "outer: inner");
    }
}
