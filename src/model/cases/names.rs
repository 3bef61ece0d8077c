//! The one rule for the names a case matrix gives directories: a matrix's NAME and every case
//! id are `[A-Za-z0-9_.=-]+` and never `.` or `..`, so no name can lead out of the cases
//! directory (`../x`, `/`, an empty name are refused).

/// Whether `name` may name a case matrix or a case: `[A-Za-z0-9_.=-]+`, not `.` or `..`.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'=' | b'-'))
}

/// Checks `name` for [`is_valid`].
///
/// # Errors
/// A message naming `what` (`case matrix name`, `case id`) and the name.
pub fn check(what: &str, name: &str) -> Result<(), String> {
    if is_valid(name) {
        Ok(())
    } else {
        Err(format!(
            "{what} {name:?} is refused: names are [A-Za-z0-9_.=-]+ and never . or .."
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_pass() {
        for good in [
            "baseline",
            "dtype=bfloat16",
            "layout.x=transposed",
            "option.eps=1e-05",
            "a-b_c",
        ] {
            assert!(is_valid(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/",
            "a/b",
            "x y",
            "dtype[x]=f",
            "option:eps=1",
            "é",
        ] {
            assert!(!is_valid(bad), "{bad}");
        }
        let e = check("case id", "../x").unwrap_err();
        assert!(
            e.contains("\"../x\"") && e.contains("[A-Za-z0-9_.=-]+"),
            "{e}"
        );
    }
}
