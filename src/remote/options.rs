//! How dumpview reaches remote hosts ([`SshOptions`]): the ssh program, host-key trust,
//! timeouts, the local cache and the watcher's poll interval.

use std::path::PathBuf;
use std::time::Duration;

/// The cache's cap when `--cache-size` is not given: 2 GiB.
pub const DEFAULT_CACHE_SIZE: u64 = 2 << 30;

/// ssh's `ConnectTimeout` when none is chosen, seconds.
pub const DEFAULT_CONNECT_TIMEOUT_S: u32 = 10;

/// The watcher's listing interval when `--poll` is not given.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// The environment variable that chooses the ssh program and its options when
/// `--ssh-command` is not given (as git's `GIT_SSH_COMMAND`).
pub const SSH_COMMAND_ENV: &str = "DUMPVIEW_SSH";

/// Everything a [`crate::remote::Mirror`] needs to know besides the source itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshOptions {
    /// The ssh program and the user's options, as words (`["ssh", "-F", "/path/config"]`):
    /// from `--ssh-command CMD` or `$DUMPVIEW_SSH`, split like a shell would; else `["ssh"]`.
    /// dumpview's own `-o` options go right after the program, so they win over the user's
    /// (OpenSSH keeps the first value it is given).
    pub command: Vec<String>,
    /// `--accept-new-host-key`: pass `StrictHostKeyChecking=accept-new`, trusting (and
    /// recording in known_hosts) a host seen for the first time; a changed key still fails.
    pub accept_new_host_key: bool,
    /// ssh's `ConnectTimeout`, seconds.
    pub connect_timeout_s: u32,
    /// The local cache's root: `--cache-dir`, else `$XDG_CACHE_HOME/dumpview/remote`, else
    /// `~/.cache/dumpview/remote`.
    pub cache_dir: PathBuf,
    /// The cache's cap in bytes (`--cache-size`, default [`DEFAULT_CACHE_SIZE`]); least
    /// recently used files go first, never one of a live mirror's dump files.
    pub cache_size: u64,
    /// How often a watcher lists a remote source (`--poll`, default [`DEFAULT_POLL`]);
    /// a snapshot lists once and ignores it.
    pub poll: Duration,
}

impl SshOptions {
    /// The options from the command line's values, each `None` where not given: the ssh
    /// command falls back to `$DUMPVIEW_SSH` then `ssh`, the cache to the XDG cache directory.
    ///
    /// # Errors
    /// A command (given or from the environment) that is empty or cannot be split (an
    /// unclosed quote); no cache directory given and neither `XDG_CACHE_HOME` nor `HOME` set.
    pub fn new(
        ssh_command: Option<&str>,
        accept_new_host_key: bool,
        cache_dir: Option<PathBuf>,
        cache_size: Option<u64>,
        poll: Option<Duration>,
    ) -> Result<SshOptions, String> {
        let from_env = std::env::var(SSH_COMMAND_ENV).ok();
        let (text, origin) = match (ssh_command, from_env.as_deref()) {
            (Some(text), _) => (Some(text), "--ssh-command"),
            (None, Some(text)) if !text.trim().is_empty() => (Some(text), SSH_COMMAND_ENV),
            _ => (None, ""),
        };
        let command = match text {
            Some(text) => {
                split_command(text).map_err(|problem| format!("{origin} {text:?}: {problem}"))?
            }
            None => vec!["ssh".to_string()],
        };
        let cache_dir = match cache_dir {
            Some(dir) => dir,
            None => default_cache_dir()?,
        };
        Ok(SshOptions {
            command,
            accept_new_host_key,
            connect_timeout_s: DEFAULT_CONNECT_TIMEOUT_S,
            cache_dir,
            cache_size: cache_size.unwrap_or(DEFAULT_CACHE_SIZE),
            poll: poll.unwrap_or(DEFAULT_POLL),
        })
    }
}

/// Splits an ssh command line into words as a POSIX shell would (quotes and backslashes;
/// no variables or globs).
///
/// # Errors
/// An unclosed quote or a trailing backslash; a command with no words.
pub fn split_command(text: &str) -> Result<Vec<String>, String> {
    let words = shlex::split(text).ok_or("an unclosed quote or a trailing backslash")?;
    if words.is_empty() {
        return Err("no program named".into());
    }
    Ok(words)
}

/// `$XDG_CACHE_HOME/dumpview/remote`, else `$HOME/.cache/dumpview/remote`.
///
/// # Errors
/// Neither variable set (or not absolute, which XDG says to ignore).
pub fn default_cache_dir() -> Result<PathBuf, String> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(xdg) = absolute("XDG_CACHE_HOME") {
        return Ok(xdg.join("dumpview/remote"));
    }
    absolute("HOME")
        .map(|home| home.join(".cache/dumpview/remote"))
        .ok_or_else(|| {
            "no cache directory for remote sources: set XDG_CACHE_HOME or HOME, or pass --cache-dir"
                .to_string()
        })
}

/// Reads a size as `--cache-size` takes it: bytes, or a number with a unit `K`, `M`, `G`,
/// `T` (powers of 1024; `KiB`, `MB`, … are read the same), e.g. `2G`, `500M`, `1.5GiB`.
///
/// # Errors
/// A text that is not a non-negative number with one of those units.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    if number.is_empty() {
        return Err(format!("{text:?}: not a size (e.g. 2G, 500M, 1048576)"));
    }
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?}; use bytes or K, M, G, T (e.g. 2G)"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?}: not a size (e.g. 2G, 500M, 1048576)"))?;
    let bytes = (value * scale as f64).round();
    // 2^64 itself is not a u64 (an `as` cast would saturate to it silently).
    if bytes >= 18_446_744_073_709_551_616.0 {
        return Err(format!("{text:?}: more than 2^64 bytes"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("500M").unwrap(), 500 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(
            parse_size("99999999T")
                .unwrap_err()
                .contains("more than 2^64 bytes")
        );
        assert_eq!(parse_size("10 kb").unwrap(), 10240);
        assert!(parse_size("2X").unwrap_err().contains("unknown unit"));
        assert!(parse_size("big").unwrap_err().contains("not a size"));
        assert!(parse_size("-1G").is_err());
    }

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command("ssh -F '/tmp/my config' -o \"User=a b\"").unwrap(),
            ["ssh", "-F", "/tmp/my config", "-o", "User=a b"]
        );
        assert!(split_command("ssh -F 'open").is_err());
        assert!(split_command("   ").is_err());
    }
}
