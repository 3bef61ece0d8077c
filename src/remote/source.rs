//! SOURCE as the user writes it ([`parse_source`]): a local path, `ssh://[user@]host[:port]/path`,
//! or scp's `[user@]host:path`.

use std::path::{Component, Path, PathBuf};

/// A capture's place as the user wrote it on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A file or directory on this machine.
    Local(PathBuf),
    /// A file or directory on another machine, read through ssh.
    Remote(RemoteSpec),
}

/// A remote file or directory: where to connect and what to read there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RemoteSpec {
    /// The login name (`-l`); `None` lets ssh choose (its config, else the local user).
    pub user: Option<String>,
    /// The host as given: a name from `~/.ssh/config`, a DNS name or an address (IPv6
    /// without brackets).
    pub host: String,
    /// The port (`-p`); `None` lets ssh choose (its config, else 22).
    pub port: Option<u16>,
    /// The path on the remote host, byte for byte as given: absolute (`/data/dump`), or
    /// relative to the remote login's home directory (`dump`, `~/dump` is read as `dump`;
    /// empty for the home directory itself).
    pub path: String,
}

/// Why a SOURCE could not be read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The text names a remote source but a part of it is malformed.
    #[error("{text:?}: {problem}")]
    Malformed {
        /// The SOURCE as given.
        text: String,
        /// What is wrong with it, and how to write it.
        problem: String,
    },
}

/// Reads SOURCE as the user writes it.
///
/// - `ssh://[user@]host[:port]/path`: the path is absolute (`ssh://h/data` reads `/data`) and
///   percent-decoded as a URL's (`%20` is a space); an IPv6 address is written in brackets
///   (`ssh://[::1]:2222/data`).
/// - `[user@]host:path` (scp's form): remote only when no `/` comes before the first `:`;
///   `host:relative` and `host:~/relative` are relative to the remote home, `host:` is the
///   home itself, `[::1]:path` an IPv6 address.
/// - Anything else is a local path: `./host:x` and `dir/host:x` are local.
///
/// # Errors
/// [`SourceError::Malformed`] for a remote SOURCE with an empty host or user, a host or user
/// that starts with `-` (it would read as an ssh option) or holds a space or control
/// character, a port that is not 1..=65535, an `ssh://` URL without a path, or a path with a
/// `..` component or a NUL byte (the local cache mirrors the path, and must stay inside it).
pub fn parse_source(text: &str) -> Result<SourceSpec, SourceError> {
    let bad = |problem: String| SourceError::Malformed {
        text: text.to_string(),
        problem,
    };
    if let Some(rest) = text.strip_prefix("ssh://") {
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => {
                return Err(bad(
                    "an ssh:// source needs an absolute path after the host: ssh://host/path/to/dump"
                        .into(),
                ));
            }
        };
        let (user, host_port) = split_user(authority).map_err(bad)?;
        let (host, port) = split_host_port(host_port).map_err(bad)?;
        // A URL's path is percent-encoded (`%20` is a space), as RFC 3986 has it.
        let path = percent_encoding::percent_decode_str(path)
            .decode_utf8()
            .map_err(|_| bad("the path's %-escapes do not decode to UTF-8 text".into()))?;
        return remote(user, host, port, path.into_owned()).map_err(bad);
    }
    let Some(colon) = scp_colon(text) else {
        return Ok(SourceSpec::Local(PathBuf::from(text)));
    };
    let (authority, path) = (&text[..colon], &text[colon + 1..]);
    let (user, host) = split_user(authority).map_err(bad)?;
    let host = match host.strip_prefix('[') {
        Some(inner) => inner
            .strip_suffix(']')
            .ok_or_else(|| bad("an IPv6 address in brackets lacks its `]`".into()))?,
        None => host,
    };
    let path = match path {
        "~" => "",
        p => p.strip_prefix("~/").unwrap_or(p),
    };
    remote(user, host, None, path.to_string()).map_err(bad)
}

/// Where scp's `host:path` splits, when `text` is in that form: the first `:` outside an
/// IPv6 address's brackets, with no `/` before it.
fn scp_colon(text: &str) -> Option<usize> {
    let search_from = match (text.find('['), text.find(']')) {
        (Some(open), Some(close)) if open < close && !text[..open].contains(['/', ':']) => {
            close + 1
        }
        _ => 0,
    };
    let colon = search_from + text[search_from..].find(':')?;
    (!text[..colon].contains('/') && colon > 0).then_some(colon)
}

fn split_user(authority: &str) -> Result<(Option<&str>, &str), String> {
    match authority.rsplit_once('@') {
        Some((user, host)) => Ok((Some(user), host)),
        None => Ok((None, authority)),
    }
}

fn split_host_port(host_port: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return Err("an IPv6 address in brackets lacks its `]`".into());
        };
        let after = &inner[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(format!("unexpected {after:?} after the address")),
        };
        (&inner[..close], port)
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("the port {p:?} is not a number from 1 to 65535"))?,
        ),
    };
    Ok((host, port))
}

fn remote(
    user: Option<&str>,
    host: &str,
    port: Option<u16>,
    path: String,
) -> Result<SourceSpec, String> {
    let name_problem = |what: &str, name: &str| -> Option<String> {
        if name.is_empty() {
            Some(format!("the {what} is empty"))
        } else if name.starts_with('-') {
            Some(format!(
                "the {what} {name:?} starts with `-`, which ssh would read as an option"
            ))
        } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Some(format!(
                "the {what} {name:?} holds a space or a control character"
            ))
        } else {
            None
        }
    };
    if let Some(user) = user {
        if let Some(problem) = name_problem("user", user) {
            return Err(problem);
        }
    }
    if let Some(problem) = name_problem("host", host) {
        return Err(problem);
    }
    if host.contains('/') {
        return Err(format!("the host {host:?} holds a `/`"));
    }
    if path.contains('\0') {
        return Err("the path holds a NUL byte".into());
    }
    if Path::new(&path)
        .components()
        .any(|c| c == Component::ParentDir)
    {
        return Err("the remote path holds a `..` component; write the path without it".into());
    }
    Ok(SourceSpec::Remote(RemoteSpec {
        user: user.map(str::to_string),
        host: host.to_string(),
        port,
        path,
    }))
}

impl RemoteSpec {
    /// Where this source is mirrored under `cache_dir`:
    /// `<cache_dir>/[<user>@]<host>[_<port>]/<path…>` for an absolute path, and
    /// `<cache_dir>/[<user>@]<host>[_<port>]/~[<user>]/<path…>` for a path relative to the remote home
    /// (whose home it is depends on the user).
    pub fn cache_path(&self, cache_dir: &Path) -> PathBuf {
        let mut dir = cache_dir.join(self.host_dir());
        if !self.path.starts_with('/') {
            dir.push(format!("~{}", self.user.as_deref().unwrap_or("")));
        }
        for component in Path::new(&self.path).components() {
            if let Component::Normal(name) = component {
                dir.push(name);
            }
        }
        dir
    }

    /// The cache's directory name for the host: `host`, `host_port` with a port, and
    /// `user@…` with a user: `root@gpu1:` and `gpu1:` may read different files (another
    /// user's permissions, another home), so they never share a mirror.
    pub fn host_dir(&self) -> String {
        let host = match self.port {
            Some(port) => format!("{}_{port}", self.host),
            None => self.host.clone(),
        };
        match &self.user {
            Some(user) => format!("{user}@{host}"),
            None => host,
        }
    }

    /// `[user@]host[:port]`, as messages name the host.
    pub fn authority(&self) -> String {
        let user = self
            .user
            .as_deref()
            .map_or(String::new(), |u| format!("{u}@"));
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        match self.port {
            Some(port) => format!("{user}{host}:{port}"),
            None => format!("{user}{host}"),
        }
    }
}

impl std::fmt::Display for RemoteSpec {
    /// The source written back: `ssh://[user@]host[:port]/path` for an absolute path, scp's
    /// `[user@]host:path` for a path relative to the remote home.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path.starts_with('/') {
            true => write!(f, "ssh://{}{}", self.authority(), self.path),
            false => write!(f, "{}:{}", self.authority(), self.path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(user: Option<&str>, host: &str, port: Option<u16>, path: &str) -> SourceSpec {
        SourceSpec::Remote(RemoteSpec {
            user: user.map(str::to_string),
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }

    #[test]
    fn ssh_urls_and_scp_forms_are_remote_and_the_rest_is_local() {
        let cases = [
            (
                "ssh://gpu1/data/dump",
                remote(None, "gpu1", None, "/data/dump"),
            ),
            (
                "ssh://alice@gpu1:2222/data/dump",
                remote(Some("alice"), "gpu1", Some(2222), "/data/dump"),
            ),
            ("ssh://[::1]:22/d", remote(None, "::1", Some(22), "/d")),
            ("ssh://a@b@h/d", remote(Some("a@b"), "h", None, "/d")),
            ("gpu1:/data/dump", remote(None, "gpu1", None, "/data/dump")),
            ("gpu1:dump", remote(None, "gpu1", None, "dump")),
            ("gpu1:~/dump", remote(None, "gpu1", None, "dump")),
            ("gpu1:", remote(None, "gpu1", None, "")),
            (
                "bob@gpu1:runs/a:b",
                remote(Some("bob"), "gpu1", None, "runs/a:b"),
            ),
            ("[fe80::1]:dump", remote(None, "fe80::1", None, "dump")),
            (
                "gpu1:dir with space/$(x)",
                remote(None, "gpu1", None, "dir with space/$(x)"),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_source(text).unwrap(), expected, "{text}");
        }
        for local in [
            "./gpu1:dump",
            "runs/x:y",
            "/abs/a:b",
            "plain",
            ":leading",
            "",
        ] {
            assert_eq!(
                parse_source(local).unwrap(),
                SourceSpec::Local(PathBuf::from(local)),
                "{local}"
            );
        }
    }

    #[test]
    fn malformed_remote_sources_say_what_is_wrong() {
        let cases = [
            ("ssh://gpu1", "absolute path after the host"),
            ("ssh://gpu1:0/d", "not a number from 1 to 65535"),
            ("ssh://gpu1:ssh/d", "not a number"),
            ("ssh:///d", "host is empty"),
            ("@gpu1:d", "user is empty"),
            ("-oProxyCommand=x:d", "starts with `-`"),
            ("ssh://-x/d", "starts with `-`"),
            ("gpu1:../etc", "`..` component"),
            ("ssh://gpu1/a/../b", "`..` component"),
            ("[::1:d", "lacks its `]`"),
        ];
        for (text, problem) in cases {
            let error = parse_source(text).unwrap_err().to_string();
            assert!(error.contains(problem), "{text}: {error}");
            assert!(error.contains(&format!("{text:?}")), "{error}");
        }
    }

    #[test]
    fn the_cache_mirrors_host_port_and_path() {
        let spec = |t: &str| match parse_source(t).unwrap() {
            SourceSpec::Remote(r) => r,
            SourceSpec::Local(_) => unreachable!(),
        };
        let cache = Path::new("/c");
        assert_eq!(
            spec("ssh://u@gpu1:2222/data/d").cache_path(cache),
            Path::new("/c/u@gpu1_2222/data/d")
        );
        // Issue 31, item 16: another user is another mirror.
        assert_eq!(
            spec("root@gpu1:/data/d").cache_path(cache),
            Path::new("/c/root@gpu1/data/d")
        );
        assert_eq!(
            spec("gpu1:/data/d/").cache_path(cache),
            Path::new("/c/gpu1/data/d")
        );
        assert_eq!(spec("gpu1:d").cache_path(cache), Path::new("/c/gpu1/~/d"));
        assert_eq!(
            spec("bob@gpu1:d").cache_path(cache),
            Path::new("/c/bob@gpu1/~bob/d")
        );
        assert_eq!(spec("ssh://u@[::1]:2/d").to_string(), "ssh://u@[::1]:2/d");
        // Issue 31, item 16: a URL's %-escapes are decoded.
        assert_eq!(spec("ssh://gpu1/data/my%20runs/d").path, "/data/my runs/d");
        assert!(parse_source("ssh://gpu1/data/%ff").is_err());
        assert_eq!(spec("bob@gpu1:d").to_string(), "bob@gpu1:d");
    }
}
