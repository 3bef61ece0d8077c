//! The shell scripts dumpview runs on the remote host, and the parsing of what they print.
//!
//! They need a POSIX `sh` and coreutils/findutils only, and they only read: no file is
//! written, created or removed there (no temporary file either: everything comes back on
//! stdout). Every remote path is written into a script single-quoted ([`quote`]), so names
//! with spaces, quotes, `;`, `$(…)` or newlines are taken literally.

use std::fmt::Write as _;

/// How the remote host lists files, found by a probe once per mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lister {
    /// GNU find's `-printf '%i %s %T@ %P\0'` (mtime with fractions of a second) and
    /// `-newerct` for listings of what changed since the last one.
    GnuFind,
    /// No GNU find: POSIX `find … -exec` and GNU-style `stat -c '%i %s %Y'` (busybox,
    /// coreutils without findutils). Whole-second times, a full listing every time.
    GnuStat,
    /// No GNU find: POSIX `find … -exec` and BSD `stat -f '%i %z %m'` (macOS, the BSDs).
    /// Whole-second times, a full listing every time.
    BsdStat,
}

impl Lister {
    fn from_word(word: &str) -> Option<Lister> {
        match word {
            "gnu-find" => Some(Lister::GnuFind),
            "gnu-stat" => Some(Lister::GnuStat),
            "bsd-stat" => Some(Lister::BsdStat),
            _ => None,
        }
    }

    /// How it is said in messages and docs.
    pub fn describe(self) -> &'static str {
        match self {
            Lister::GnuFind => "GNU find -printf",
            Lister::GnuStat => {
                "find -exec stat -c (no GNU find: whole-second times, full listings)"
            }
            Lister::BsdStat => {
                "find -exec stat -f (no GNU find: whole-second times, full listings)"
            }
        }
    }

    /// Whether listings can be limited to what changed (`-newerct`).
    pub fn incremental(self) -> bool {
        self == Lister::GnuFind
    }

    /// A shell function `m FILE` printing `inode size mtime` of FILE (links followed).
    fn meta_function(self) -> &'static str {
        match self {
            Lister::GnuFind => "m() { find -L \"$1\" -maxdepth 0 -printf '%i %s %T@'; }\n",
            Lister::GnuStat => "m() { stat -L -c '%i %s %Y' -- \"$1\"; }\n",
            Lister::BsdStat => "m() { stat -L -f '%i %z %m' -- \"$1\"; }\n",
        }
    }
}

/// What the remote path is, as [`probe`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A directory that can be listed.
    Dir,
    /// A regular file that can be read.
    File,
    /// Nothing there (a dangling link too).
    Missing,
    /// There, but not readable (or, for a directory, not searchable).
    Unreadable,
    /// Neither a file nor a directory (a FIFO, a device, a socket).
    Other,
}

/// Exit statuses of the scripts (anything but 255, which is ssh's own).
pub mod status {
    /// The file or directory is not there.
    pub const MISSING: i32 = 3;
    /// It is there but cannot be read.
    pub const UNREADABLE: i32 = 4;
    /// It changed while it was read: try again later.
    pub const UNSTABLE: i32 = 5;
    /// It is not a regular file.
    pub const NOT_A_FILE: i32 = 6;
    /// It is what the caller has already ([`super::fetch`] with `unless`).
    pub const UNCHANGED: i32 = 10;
}

/// `text` as one single-quoted shell word: `'` closes, `\'` is a quote, `'` reopens.
/// Nothing inside single quotes is special to a POSIX shell, newlines included.
pub fn quote(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 2);
    out.push(b'\'');
    for &b in text {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

fn assign(name: &str, value: &[u8]) -> Vec<u8> {
    let mut line = format!("{name}=").into_bytes();
    line.extend(quote(value));
    line.push(b'\n');
    line
}

/// The path as the scripts use it: `.` for the home directory, without trailing slashes.
pub fn remote_path(path: &str) -> Vec<u8> {
    let trimmed = path.trim_end_matches('/');
    match (path.is_empty(), trimmed.is_empty()) {
        (true, _) => b".".to_vec(),
        (false, true) => b"/".to_vec(),
        (false, false) => trimmed.as_bytes().to_vec(),
    }
}

/// Script: what `path` is, which [`Lister`] the host has, and whether its `head` takes `-c`
/// (for [`fetch_batch`]). Prints one line, `dumpview-probe 1 KIND LISTER HEAD`.
pub fn probe(path: &[u8]) -> Vec<u8> {
    let mut script = b"LC_ALL=C; export LC_ALL\n".to_vec();
    script.extend(assign("p", path));
    script.extend_from_slice(
        br#"if [ -d "$p" ]; then k=dir; [ -r "$p" ] && [ -x "$p" ] || k=unreadable
elif [ -f "$p" ]; then k=file; [ -r "$p" ] || k=unreadable
elif [ -e "$p" ]; then k=other
else k=missing; fi
if find / -maxdepth 0 -printf '' >/dev/null 2>&1; then l=gnu-find
elif stat -L -c %i / >/dev/null 2>&1; then l=gnu-stat
elif stat -L -f %i / >/dev/null 2>&1; then l=bsd-stat
else l=none; fi
if [ "$(printf ab | head -c 1 2>/dev/null)" = a ]; then h=head-c; else h=no-head-c; fi
printf 'dumpview-probe 1 %s %s %s\n' "$k" "$l" "$h"
"#,
    );
    script
}

/// What [`probe`] printed: the path's kind, the lister, whether files can be fetched in
/// batches (`head -c`).
///
/// # Errors
/// Output that is not the probe's line; a host with neither GNU find nor a `stat` dumpview
/// can read (the message says which tools are needed).
pub fn parse_probe(out: &[u8]) -> Result<(PathKind, Lister, bool), String> {
    let text = String::from_utf8_lossy(out);
    let line = text
        .lines()
        .find(|l| l.starts_with("dumpview-probe "))
        .ok_or_else(|| {
            format!(
                "the remote shell did not answer as expected: {:?}",
                text.trim()
            )
        })?;
    let words: Vec<&str> = line.split(' ').collect();
    let [_, "1", kind, lister, head] = words[..] else {
        return Err(format!("unexpected probe answer {line:?}"));
    };
    let kind = match kind {
        "dir" => PathKind::Dir,
        "file" => PathKind::File,
        "missing" => PathKind::Missing,
        "unreadable" => PathKind::Unreadable,
        _ => PathKind::Other,
    };
    let lister = Lister::from_word(lister).ok_or_else(|| {
        "the remote host has neither GNU find (-printf) nor a stat that dumpview can read \
         (`stat -c` or `stat -f`); install findutils or coreutils there"
            .to_string()
    })?;
    Ok((kind, lister, head == "head-c"))
}

/// Script: the listing of the dump files under `path` (or of `path` itself when it is a
/// file): first `dumpview-list 1 <remote time at the start>\0`, then per file
/// `<inode> <size> <mtime> <path relative to `path`>\0`. With `since` (a remote time, GNU
/// find only), only files whose status changed since then (`-newerct`: a rename or a copy
/// that keeps an old mtime changes the ctime too).
pub fn list(path: &[u8], names: &[&str], lister: Lister, since: Option<&str>) -> Vec<u8> {
    let mut script = b"LC_ALL=C; export LC_ALL\n".to_vec();
    script.extend(assign("p", path));
    let mut name_test = String::from("\\(");
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            name_test.push_str(" -o");
        }
        let _ = write!(
            name_test,
            " -name {}",
            String::from_utf8_lossy(&quote(name.as_bytes()))
        );
    }
    name_test.push_str(" \\)");
    script.extend_from_slice(
        b"[ -e \"$p\" ] || { echo \"no such file or directory\" >&2; exit 3; }\n",
    );
    match lister {
        Lister::GnuFind => {
            // An incremental listing prints each unchanged file as `=` alone: their count
            // tells a deletion since the last listing (fewer files than known) without the
            // bytes of a full listing.
            let print = match since {
                Some(t) => format!(
                    " \\( -newerct '@{}' -printf '%i %s %T@ %P\\0' -o -printf '=\\0' \\)",
                    t.replace('\'', "")
                ),
                None => " -printf '%i %s %T@ %P\\0'".to_string(),
            };
            let _ = write!(
                &mut script_text(&mut script),
                "t=$(date +%s.%N 2>/dev/null); case $t in *N*|'') t=$(date +%s);; esac\n\
                 printf 'dumpview-list 1 %s\\0' \"$t\"\n\
                 if [ -d \"$p\" ]; then\n\
                 \x20 find -L \"$p\" -type f {name_test}{print}\n\
                 else\n\
                 \x20 find -L \"$p\" -maxdepth 0 -printf '%i %s %T@ \\0'\n\
                 fi\n"
            );
        }
        Lister::GnuStat | Lister::BsdStat => {
            let stat = match lister {
                Lister::GnuStat => "stat -L -c '%i %s %Y'",
                _ => "stat -L -f '%i %z %m'",
            };
            let _ = write!(
                &mut script_text(&mut script),
                "printf 'dumpview-list 1 %s\\0' \"$(date +%s)\"\n\
                 if [ -d \"$p\" ]; then\n\
                 \x20 case $p in */) pre=$p;; *) pre=$p/;; esac\n\
                 \x20 find -L \"$p\" -type f {name_test} -exec sh -c 'pre=$1; shift; for f do m=$({stat} -- \"$f\") || continue; printf \"%s %s\\0\" \"$m\" \"${{f#\"$pre\"}}\"; done' sh \"$pre\" {{}} +\n\
                 else\n\
                 \x20 printf '%s \\0' \"$({stat} -- \"$p\")\"\n\
                 fi\n",
                stat = stat.replace('\'', "\""),
            );
        }
    }
    script
}

/// A `fmt::Write` over a script's bytes (the scripts' fixed parts are ASCII).
fn script_text(script: &mut Vec<u8>) -> impl std::fmt::Write + '_ {
    struct Bytes<'a>(&'a mut Vec<u8>);
    impl std::fmt::Write for Bytes<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    Bytes(script)
}

/// One file of a listing: the identity dumpview de-duplicates on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemoteMeta {
    /// Inode number.
    pub inode: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time as the remote host printed it (seconds since the epoch, with
    /// fractions where GNU find gives them): compared as text, never as a float.
    pub mtime: String,
}

impl RemoteMeta {
    /// Seconds from this file's mtime to `now` (a remote time as the listing prints it);
    /// `None` when either does not read as a number.
    pub fn age_at(&self, now: &str) -> Option<f64> {
        Some(now.parse::<f64>().ok()? - self.mtime.parse::<f64>().ok()?)
    }

    /// `inode size mtime`, as the scripts print it.
    pub fn line(&self) -> String {
        format!("{} {} {}", self.inode, self.size, self.mtime)
    }

    /// Reads `inode size mtime`.
    pub fn parse(text: &str) -> Option<RemoteMeta> {
        let mut words = text.split(' ');
        let inode = words.next()?.parse().ok()?;
        let size = words.next()?.parse().ok()?;
        let mtime = words.next()?.to_string();
        if mtime.is_empty() || words.next().is_some() {
            return None;
        }
        Some(RemoteMeta { inode, size, mtime })
    }
}

/// A parsed listing.
#[derive(Debug, Default)]
pub struct Listing {
    /// The remote clock when the listing started (the next listing's watermark).
    pub started: String,
    /// Each file: its path relative to the listed path (raw bytes; empty when the listed
    /// path is the file itself) and its identity.
    pub files: Vec<(Vec<u8>, RemoteMeta)>,
    /// Entries that could not be read (a path with `..`, a malformed line), as messages.
    pub refused: Vec<String>,
    /// How many files an incremental listing found unchanged since its watermark (printed as
    /// `=` alone, not in `files`); 0 for a full listing.
    pub unchanged: u64,
}

/// Reads what [`list`] printed.
///
/// # Errors
/// Output without the listing's header (not the script's output at all).
pub fn parse_listing(out: &[u8]) -> Result<Listing, String> {
    let mut parts = out.split(|&b| b == 0);
    let header = parts.next().unwrap_or_default();
    let header = String::from_utf8_lossy(header);
    let started = header
        .strip_prefix("dumpview-list 1 ")
        .ok_or_else(|| {
            format!(
                "the listing does not start as expected: {:?}",
                truncate(&header)
            )
        })?
        .trim()
        .to_string();
    let mut listing = Listing {
        started,
        ..Listing::default()
    };
    let complete = out.last() == Some(&0);
    let parts: Vec<&[u8]> = parts.collect();
    let count = parts.len();
    for (i, part) in parts.into_iter().enumerate() {
        // The piece after the last NUL is empty, or an entry cut short.
        if i + 1 == count {
            if !part.is_empty() || !complete {
                listing.refused.push(format!(
                    "a cut-short entry {:?}",
                    truncate(&String::from_utf8_lossy(part))
                ));
            }
            break;
        }
        if part == b"=" {
            listing.unchanged += 1;
            continue;
        }
        let mut fields = part.splitn(4, |&b| b == b' ');
        let (Some(inode), Some(size), Some(mtime), Some(path)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            listing.refused.push(format!(
                "a malformed entry {:?}",
                truncate(&String::from_utf8_lossy(part))
            ));
            continue;
        };
        let meta = RemoteMeta::parse(&format!(
            "{} {} {}",
            String::from_utf8_lossy(inode),
            String::from_utf8_lossy(size),
            String::from_utf8_lossy(mtime)
        ));
        let Some(meta) = meta else {
            listing.refused.push(format!(
                "a malformed entry {:?}",
                truncate(&String::from_utf8_lossy(part))
            ));
            continue;
        };
        if let Err(why) = check_relative(path) {
            listing.refused.push(why);
            continue;
        }
        listing.files.push((path.to_vec(), meta));
    }
    Ok(listing)
}

/// A relative path from a listing is safe to mirror: no `..`, `.` or empty components, not
/// absolute (a listing from a hostile host must not write outside the cache).
pub fn check_relative(path: &[u8]) -> Result<(), String> {
    if path.is_empty() {
        return Ok(());
    }
    let bad = path.starts_with(b"/")
        || path
            .split(|&b| b == b'/')
            .any(|c| c.is_empty() || c == b"." || c == b"..");
    match bad {
        true => Err(format!(
            "a path that would leave the mirror: {:?}",
            truncate(&String::from_utf8_lossy(path))
        )),
        false => Ok(()),
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Script: the file `file` from byte `from` on: first its `inode size mtime` and a newline,
/// then the bytes; exits [`status::UNSTABLE`] when the file's identity changed while it was
/// read or is not `expect` (what the listing said: it changed since), and
/// [`status::UNCHANGED`] (printing nothing) when it is `unless` already.
pub fn fetch(
    file: &[u8],
    from: u64,
    lister: Lister,
    unless: Option<&RemoteMeta>,
    expect: Option<&RemoteMeta>,
) -> Vec<u8> {
    let mut script = b"LC_ALL=C; export LC_ALL\n".to_vec();
    script.extend(assign("f", file));
    script.extend_from_slice(lister.meta_function().as_bytes());
    script.extend_from_slice(
        b"[ -e \"$f\" ] || exit 3\n[ -f \"$f\" ] || exit 6\n[ -r \"$f\" ] || exit 4\na=$(m \"$f\") || exit 4\n",
    );
    if let Some(meta) = unless {
        script.extend(assign("u", meta.line().as_bytes()));
        script.extend_from_slice(b"[ \"$a\" = \"$u\" ] && exit 10\n");
    }
    if let Some(meta) = expect {
        script.extend(assign("e", meta.line().as_bytes()));
        script.extend_from_slice(b"[ \"$a\" = \"$e\" ] || exit 5\n");
    }
    script.extend_from_slice(b"printf '%s\\n' \"$a\"\n");
    match from {
        0 => script.extend_from_slice(b"cat -- \"$f\" || exit 4\n"),
        n => {
            let _ = writeln!(
                script_text(&mut script),
                "tail -c +{} -- \"$f\" || exit 4",
                n + 1
            );
        }
    }
    script.extend_from_slice(b"b=$(m \"$f\") || exit 5\n[ \"$a\" = \"$b\" ] || exit 5\n");
    script
}

/// One file of [`fetch_batch`]: its remote path, what it must be to be sent (the listing's
/// identity; else `X 5`), and what the caller holds already (then `U`, nothing sent).
pub struct BatchFile<'a> {
    /// The remote path.
    pub path: &'a [u8],
    /// Send it only if its identity is this.
    pub expect: Option<&'a RemoteMeta>,
    /// Do not send it if its identity is this.
    pub unless: Option<&'a RemoteMeta>,
}

/// Script: several whole files in one command. For each, in order, one of: `X <status>\n`
/// (a [`status`] code: missing, unreadable, not a file, or not `expect`), `U\n` (it is
/// `unless`), or `F <inode> <size> <mtime>\n`, exactly `size` bytes (the file, cut or padded
/// with zeros when it changed size while read), and `E <inode> <size> <mtime>\n` read after:
/// the bytes are the file only when the two lines agree.
pub fn fetch_batch(files: &[BatchFile<'_>], lister: Lister) -> Vec<u8> {
    let mut script = b"LC_ALL=C; export LC_ALL\n".to_vec();
    script.extend_from_slice(lister.meta_function().as_bytes());
    script.extend_from_slice(
        br#"one() {
  f=$1
  [ -e "$f" ] || { echo 'X 3'; return; }
  [ -f "$f" ] || { echo 'X 6'; return; }
  [ -r "$f" ] || { echo 'X 4'; return; }
  a=$(m "$f") || { echo 'X 4'; return; }
  [ -z "$2" ] || [ "$a" = "$2" ] || { echo 'X 5'; return; }
  [ -n "$3" ] && [ "$a" = "$3" ] && { echo U; return; }
  printf 'F %s
' "$a"
  set -- $a
  { cat -- "$f" 2>/dev/null; cat /dev/zero; } | head -c "$2"
  b=$(m "$f") || b=gone
  printf 'E %s
' "$b"
}
"#,
    );
    for file in files {
        script.extend_from_slice(b"one ");
        script.extend(quote(file.path));
        for meta in [file.expect, file.unless] {
            script.push(b' ');
            script.extend(quote(
                meta.map(RemoteMeta::line).unwrap_or_default().as_bytes(),
            ));
        }
        script.push(b'\n');
    }
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_every_byte_literal() {
        assert_eq!(quote(b"plain"), b"'plain'");
        assert_eq!(quote(b"it's"), b"'it'\\''s'");
        assert_eq!(quote(b"a\nb $(x) `y` ;z"), b"'a\nb $(x) `y` ;z'");
        assert_eq!(remote_path(""), b".");
        assert_eq!(remote_path("/"), b"/");
        assert_eq!(remote_path("/a/b//"), b"/a/b");
    }

    #[test]
    fn listings_parse_and_refuse_paths_that_leave_the_mirror() {
        let out = b"dumpview-list 1 1700.5\x00\
            12 34 1700.25 rank0/w/manifest.json\x00\
            13 1 1700 dir with space/dump.json\x00\
            14 1 1700 ../escape/manifest.json\x00\
            15 1 1700 /abs\x00\
            bad\x00";
        let listing = parse_listing(out).unwrap();
        assert_eq!(listing.started, "1700.5");
        assert_eq!(listing.files.len(), 2);
        assert_eq!(listing.files[1].0, b"dir with space/dump.json");
        assert_eq!(
            listing.files[0].1,
            RemoteMeta {
                inode: 12,
                size: 34,
                mtime: "1700.25".into()
            }
        );
        assert_eq!(listing.refused.len(), 3, "{:?}", listing.refused);
        assert!(parse_listing(b"garbage").is_err());
        let cut = parse_listing(b"dumpview-list 1 1\x0012 34 17").unwrap();
        assert!(cut.files.is_empty() && cut.refused.len() == 1);
    }
}
