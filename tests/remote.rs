//! Remote sources against a real OpenSSH server (tests/support/sshd.rs): snapshots through
//! the binary give the local answers, the mirror fetches only what changed (whole when
//! rewritten in place, incrementally when grown), hostile names are taken literally, the
//! remote side is left untouched, connections come back after the server does, and no ssh
//! master outlives dumpview.

mod support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use support::sshd::Sshd;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

use support::copy_tree;
use support::run::dumpview;

/// `dumpview scan --json` of `source`, through `server`, caching into `cache`: (exit code,
/// the JSON text).
fn scan_json(server: &Sshd, cache: &Path, source: &str) -> (i32, String) {
    let out = dumpview()
        .args([
            "scan",
            "--json",
            source,
            "--ssh-command",
            &server.ssh_command(),
        ])
        .arg("--cache-dir")
        .arg(cache)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c < 2),
        "{source}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

#[test]
fn scan_of_a_remote_capture_gives_the_local_answer_for_every_format() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let cases = [
        ("probe", repo("assets/examples/llama_fp16_overflow/b")),
        ("msprobe", repo("tests/fixtures/msprobe/mlp_nan")),
        ("windowed", repo("tests/fixtures/windowed/B/l1")),
    ];
    for (name, fixture) in cases {
        // A copy outside the repository: the remote side of the test.
        let dump = work.path().join(name).join("dump");
        copy_tree(&fixture, &dump);
        let local = dumpview()
            .args(["scan", "--json"])
            .arg(&dump)
            .output()
            .unwrap();
        let local_json = String::from_utf8(local.stdout).unwrap();
        for (form, source) in [("url", server.url(&dump)), ("scp", server.scp(&dump))] {
            let cache = work.path().join(format!("cache-{name}-{form}"));
            let (code, json) = scan_json(&server, &cache, &source);
            assert_eq!(Some(code), local.status.code(), "{name} {form}");
            let root = std::fs::canonicalize(&cache).unwrap();
            let host = match form {
                "url" => format!("127.0.0.1_{}", server.port),
                _ => support::sshd::ALIAS.to_string(),
            };
            let mirrored = root.join(host).join(dump.strip_prefix("/").unwrap());
            let json = json.replace(&mirrored.display().to_string(), &dump.display().to_string());
            assert_eq!(json, local_json, "{name} through {form}");
            assert!(json.contains("\"windows\""), "{json}");
        }
    }
}

use dumpview::internals::remote::{
    Backoff, Lister, Mirror, OVERLAP_BYTES, RemoteError, SETTLE, SyncReport,
};

/// Long enough for a file rewritten in place to count as settled.
fn settle() {
    std::thread::sleep(SETTLE + std::time::Duration::from_millis(200));
}

fn open(server: &Sshd, cache: &Path, dir: &Path) -> Mirror {
    Mirror::open(&server.spec(dir), &server.options(cache))
        .unwrap_or_else(|e| panic!("{e}\n{}", server.log()))
}

/// Every file under `root` with its bytes, by relative path.
fn tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The dump files of `root` (what a mirror holds eagerly).
fn dump_files(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let names = dumpview::model::formats::mirrored_names();
    tree(root)
        .into_iter()
        .filter(|(p, _)| {
            p.file_name()
                .is_some_and(|n| names.iter().any(|name| n == *name))
        })
        .collect()
}

/// Rewrites `path` in place, as msprobe does (`open(…, "w")`: same inode, truncated, then
/// written), in two writes with a pause between them.
fn rewrite_in_place(path: &Path, bytes: &[u8], pause: std::time::Duration) {
    use std::io::Write;
    let mut file = std::fs::File::options()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    let half = bytes.len() / 2;
    file.write_all(&bytes[..half]).unwrap();
    file.flush().unwrap();
    std::thread::sleep(pause);
    file.write_all(&bytes[half..]).unwrap();
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn an_msprobe_dump_rewritten_in_place_is_fetched_whole_and_never_read_half_written() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("msprobe");
    copy_tree(&repo("tests/fixtures/msprobe/mlp_nan"), &dump);
    let file = dump.join("step0/rank0/dump.json");
    let (first, second) = (
        std::fs::read(&file).unwrap(),
        std::fs::read(dump.join("step1/rank0/dump.json")).unwrap(),
    );
    let cache = work.path().join("cache");
    let mut mirror = open(&server, &cache, &dump);
    let report = mirror.sync().unwrap();
    assert_eq!(report.listed, 6, "{report:?}");
    let local = mirror.root().join("step0/rank0/dump.json");
    assert_eq!(std::fs::read(&local).unwrap(), first);

    // Between two syncs: rewritten in place (same inode) with other, longer content.
    let before = inode(&file);
    // msprobe's rewrite holds more entries than the last one: step1's entries, made longer.
    let pad = vec![b' '; first.len().saturating_sub(second.len()) + 100];
    let longer: Vec<u8> = [&second[..], &pad[..], b"\n"].concat();
    assert!(longer.len() > first.len());
    rewrite_in_place(&file, &longer, std::time::Duration::ZERO);
    assert_eq!(inode(&file), before);
    // Just rewritten: left for the next sync, in case its writer is not done.
    let report = mirror.sync().unwrap();
    assert_eq!(report.deferred, std::slice::from_ref(&local), "{report:?}");
    assert_eq!(std::fs::read(&local).unwrap(), first);
    settle();
    let report = mirror.sync().unwrap();
    assert_eq!(report.changed, std::slice::from_ref(&local));
    assert_eq!(std::fs::read(&local).unwrap(), longer);
    // It looked grown: the overlap was fetched, differed, and the file came whole.
    let overlap = OVERLAP_BYTES.min(first.len() as u64);
    let tail = longer.len() as u64 - (first.len() as u64 - overlap);
    assert_eq!(report.bytes, tail + longer.len() as u64, "{report:?}");
    let loaded =
        dumpview::model::ingest::load(&[mirror.root().to_path_buf()], &mut |_| {}).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    // While a writer keeps rewriting it in place, half a file at a time, now and then
    // resting: every sync holds one whole version or the previous one, never a mix or half.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let versions = [first.clone(), longer.clone()];
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                rewrite_in_place(&file, &versions[i % 2], std::time::Duration::from_millis(3));
                let rest = if i % 4 == 3 { 1200 } else { 40 };
                std::thread::sleep(std::time::Duration::from_millis(rest));
                i += 1;
            }
        });
        let (mut deferred, mut fetched, mut syncs) = (0, 0, 0);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(4);
        while std::time::Instant::now() < until {
            syncs += 1;
            std::thread::sleep(std::time::Duration::from_millis(20));
            let report = mirror.sync().unwrap();
            deferred += report.deferred.len();
            fetched += report.changed.len();
            let held = std::fs::read(&local).unwrap();
            assert!(
                held == versions[0] || held == versions[1],
                "a sync left {} bytes that are neither version",
                held.len()
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "{syncs} syncs while rewritten: {fetched} fetched a whole version, {deferred} found it changing and kept the old copy"
        );
        assert!(fetched > 0, "the writer's rests were never caught");
    });
    std::fs::write(&file, &first).unwrap();
    settle();
    mirror.sync().unwrap();
    assert_eq!(std::fs::read(&local).unwrap(), first);
}

#[test]
fn a_file_that_only_grew_is_fetched_from_its_old_end_with_an_overlap() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    let file = dump.join("rank0/w/manifest.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let start: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(&file, &start).unwrap();
    let cache = work.path().join("cache");
    let mut mirror = open(&server, &cache, &dump);
    assert_eq!(mirror.sync().unwrap().bytes, start.len() as u64);
    // Appended to (same inode): the growth and the overlap come, not the whole file.
    let growth = vec![b'z'; 10_000];
    {
        use std::io::Write;
        let mut f = std::fs::File::options().append(true).open(&file).unwrap();
        f.write_all(&growth).unwrap();
    }
    settle();
    let report = mirror.sync().unwrap();
    assert_eq!(
        report.bytes,
        growth.len() as u64 + OVERLAP_BYTES,
        "{report:?}"
    );
    let local = mirror.root().join("rank0/w/manifest.json");
    assert_eq!(report.changed, std::slice::from_ref(&local));
    assert_eq!(
        std::fs::read(&local).unwrap(),
        [&start[..], &growth[..]].concat()
    );
    // Unchanged: nothing comes.
    let report = mirror.sync().unwrap();
    assert_eq!((report.bytes, report.changed.len()), (0, 0), "{report:?}");
    // Replaced by a new file (a new inode) that is larger: fetched whole.
    let replaced = vec![b'q'; 120_000];
    std::fs::write(dump.join("rank0/w/.tmp"), &replaced).unwrap();
    std::fs::rename(dump.join("rank0/w/.tmp"), &file).unwrap();
    let report = mirror.sync().unwrap();
    assert_eq!(report.bytes, replaced.len() as u64, "{report:?}");
    assert_eq!(std::fs::read(&local).unwrap(), replaced);
    // Shrunk: whole.
    std::fs::write(&file, b"{}").unwrap();
    settle();
    assert_eq!(mirror.sync().unwrap().bytes, 2);
    assert_eq!(std::fs::read(&local).unwrap(), b"{}");
}

#[test]
fn only_what_changed_is_listed_and_fetched_and_removed_files_go() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    copy_tree(&repo("assets/examples/llama_kv_alias/a"), &dump);
    copy_tree(
        &repo("assets/examples/llama_kv_alias/b"),
        &dump.join("other"),
    );
    let cache = work.path().join("cache");
    let mut mirror = open(&server, &cache, &dump);
    let first = mirror.sync().unwrap();
    // Two windows, each a manifest and the token-row sidecar (rows.f32) it names.
    assert!(first.full && first.listed == 4, "{first:?}");
    assert_eq!(dump_files(mirror.root()), dump_files(&dump));
    // Saved tensors and input sets stay remote.
    assert!(tree(mirror.root()).len() < tree(&dump).len());
    // Within the full-listing interval, the listing asks only for recent changes.
    let window = dump.join("rank7/match1-occ1");
    copy_tree(
        &repo("assets/examples/llama_kv_alias/a/rank0/match1-occ1"),
        &window,
    );
    let report = mirror.sync().unwrap();
    assert!(!report.full, "{report:?}");
    // The sidecar first, then the manifest that names it.
    let added =
        ["rows.f32", "manifest.json"].map(|f| mirror.root().join("rank7/match1-occ1").join(f));
    assert_eq!(report.changed, added);
    let size = |f: &str| std::fs::metadata(window.join(f)).unwrap().len();
    assert_eq!(report.bytes, size("manifest.json") + size("rows.f32"));
    // A removal shows at the next poll: the incremental listing counts the unchanged files,
    // finds fewer than the mirror knows, and lists in full at once (issue 31, item 16).
    std::fs::remove_dir_all(dump.join("other")).unwrap();
    let report = mirror.sync().unwrap();
    assert!(report.full && report.bytes == 0, "{report:?}");
    assert_eq!(
        report.removed.len(),
        2,
        "its manifest and rows.f32: {report:?}"
    );
    assert_eq!(dump_files(mirror.root()), dump_files(&dump));
    // A later run (a new mirror on the same cache) fetches nothing that is there already.
    drop(mirror);
    let mut again = open(&server, &cache, &dump);
    let report = again.sync().unwrap();
    assert_eq!((report.bytes, report.changed.len()), (0, 0), "{report:?}");
}

/// `text` as it appears inside a JSON string.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap();
    quoted[1..quoted.len() - 1].to_string()
}

/// Files named `pwned*` anywhere under `dir`.
fn pwned(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("pwned") {
                found.push(entry.path());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn hostile_directory_names_are_taken_literally_and_nothing_runs() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let root = work
        .path()
        .join("dumps")
        .join("$(touch pwned-root) it's; `touch pwned-tick`\nand more");
    let names = [
        "with space",
        "quote'd \"double\"",
        "semi;colon && touch pwned-and",
        "$(touch pwned-subst)",
        "new\nline",
        "`touch pwned-backtick`",
        "$HOME ${PATH} $((1+1))",
        "-rf",
        "back\\slash\\n",
        "*glob? [x]",
        "| touch pwned-pipe",
    ];
    let window = repo("assets/examples/llama_kv_alias/a/rank0/match1-occ1");
    for name in names {
        copy_tree(&window, &root.join(name).join("rank0/match1-occ1"));
    }
    let local = dumpview()
        .args(["scan", "--json"])
        .arg(&root)
        .output()
        .unwrap();
    let local_json = String::from_utf8(local.stdout).unwrap();
    assert!(local_json.contains("\"windows\""));
    for (form, source) in [("url", server.url(&root)), ("scp", server.scp(&root))] {
        let cache = work.path().join(format!("cache-{form}"));
        let (code, json) = scan_json(&server, &cache, &source);
        assert_eq!(Some(code), local.status.code());
        let host = match form {
            "url" => format!("127.0.0.1_{}", server.port),
            _ => support::sshd::ALIAS.to_string(),
        };
        let mirrored = std::fs::canonicalize(&cache)
            .unwrap()
            .join(host)
            .join(root.strip_prefix("/").unwrap());
        assert_eq!(dump_files(&mirrored), dump_files(&root), "{form}");
        let json = json.replace(
            &json_escaped(&mirrored.display().to_string()),
            &json_escaped(&root.display().to_string()),
        );
        assert_eq!(json, local_json, "{form}");
    }
    for dir in [
        server.home(),
        work.path().to_path_buf(),
        std::env::current_dir().unwrap(),
    ] {
        assert!(pwned(&dir).is_empty(), "something ran: {:?}", pwned(&dir));
    }
}

/// Every file and directory under `root`: path, kind, mode, size, mtime, inode, bytes.
fn tree_with_metadata(root: &Path) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let bytes = match meta.is_file() {
                true => std::fs::read(entry.path()).unwrap(),
                false => Vec::new(),
            };
            out.push(
                format!(
                    "{} {:o} {} {}.{} {} {:x?}",
                    entry.path().display(),
                    meta.mode(),
                    meta.len(),
                    meta.mtime(),
                    meta.mtime_nsec(),
                    meta.ino(),
                    &bytes[..bytes.len().min(64)]
                ) + &format!(" {}", bytes.iter().map(|&b| u64::from(b)).sum::<u64>()),
            );
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn reading_a_remote_capture_writes_nothing_on_the_remote_side() {
    let Some(server) = Sshd::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("remote");
    copy_tree(&repo("assets/examples/llama_fp16_overflow"), &dump);
    copy_tree(
        &repo("tests/fixtures/msprobe/mlp_tensor"),
        &dump.join("msprobe"),
    );
    let before = tree_with_metadata(&dump);
    let home_before = tree_with_metadata(&server.home());
    let cache = work.path().join("cache");
    let (a, b) = (server.url(&dump.join("a")), server.url(&dump.join("b")));
    let common = ["--ssh-command", &server.ssh_command(), "--cache-dir"];
    for args in [
        vec!["scan", &a],
        vec!["diff", &a, &b],
        vec!["report", &a, &b],
        vec!["summary", &b],
        vec!["vary", &a, &b],
    ] {
        let out = dumpview()
            .args(&args)
            .args(common)
            .arg(&cache)
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut mirror = open(&server, &cache, &dump.join("msprobe"));
    mirror.sync().unwrap();
    let tensor = mirror
        .root()
        .join("step0/proc6122/dump_tensor_data/Tensor.__add__.0.forward.input.0.pt");
    mirror.fetch(&tensor).unwrap();
    assert!(tensor.is_file());
    drop(mirror);
    assert_eq!(tree_with_metadata(&dump), before, "the remote tree changed");
    assert_eq!(
        tree_with_metadata(&server.home()),
        home_before,
        "the remote HOME/TMPDIR changed"
    );
    assert!(home_before.is_empty(), "{home_before:?}");
}

fn masters(server: &Sshd) -> Vec<String> {
    server.masters()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// dumpview `scan` of a remote capture through an ssh wrapper that lets the master connect
/// and then stalls every other command (as a hung remote file system would), so dumpview
/// is caught mid-session. Returns the running child once its master is up.
fn stalled_scan(server: &Sshd, cache: &Path, dump: &Path) -> std::process::Child {
    let wrapper = server.script(
        "stalling_ssh.sh",
        "#!/bin/sh\ncase \"$*\" in *ControlMaster=yes*|*'-O exit'*) exec ssh \"$@\";; esac\nexec sleep 60\n",
    );
    let child = std::process::Command::new(support::run::BIN)
        .args(["scan", "--json"])
        .arg(server.url(dump))
        .arg("--ssh-command")
        .arg(format!(
            "{} -F {}",
            wrapper.display(),
            server.ssh_config().display()
        ))
        .arg("--cache-dir")
        .arg(cache)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the master", || masters(server).len() == 1);
    child
}

#[test]
fn no_ssh_master_outlives_dumpview_killed_by_sigterm_or_sigkill() {
    use std::os::unix::process::ExitStatusExt;
    let Some(server) = Sshd::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    copy_tree(&repo("assets/examples/llama_kv_alias/a"), &dump);
    let cache = work.path().join("cache");

    // SIGTERM: dumpview ends the master (`ssh -O exit`), removes its control directory, and
    // dies of the signal.
    let mut child = stalled_scan(&server, &cache, &dump);
    let pid = child.id();
    assert_eq!(support::control_dirs(pid).len(), 1);
    // Private: the control directory and the master's own directory in it.
    {
        use std::os::unix::fs::PermissionsExt;
        let top = &support::control_dirs(pid)[0];
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(top), 0o700);
        for entry in std::fs::read_dir(top).unwrap() {
            assert_eq!(mode(&entry.unwrap().path()), 0o700);
        }
    }
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    wait_for("no master after SIGTERM", || masters(&server).is_empty());
    assert!(
        support::control_dirs(pid).is_empty(),
        "{:?}",
        support::control_dirs(pid)
    );

    // SIGKILL cannot be handled: the kernel ends the master (PR_SET_PDEATHSIG).
    let mut child = stalled_scan(&server, &cache, &dump);
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_for("no master after SIGKILL", || masters(&server).is_empty());
    for dir in support::control_dirs(pid) {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn mirrors_of_one_host_share_one_master_which_ends_with_the_last_and_on_a_panic() {
    let Some(server) = Sshd::start() else { return };
    let work = tempfile::tempdir().unwrap();
    for side in ["a", "b"] {
        copy_tree(
            &repo(&format!("assets/examples/llama_kv_alias/{side}")),
            &work.path().join(side),
        );
    }
    let cache = work.path().join("cache");
    let mut a = open(&server, &cache, &work.path().join("a"));
    let mut b = open(&server, &cache, &work.path().join("b"));
    a.sync().unwrap();
    b.sync().unwrap();
    assert_eq!(masters(&server).len(), 1, "{:?}", masters(&server));
    drop(a);
    assert_eq!(masters(&server).len(), 1);
    b.sync().unwrap();
    drop(b);
    assert!(masters(&server).is_empty(), "{:?}", masters(&server));

    // A panic unwinds through the mirror, whose drop ends the master.
    let dir = work.path().join("a");
    let result = std::panic::catch_unwind(|| {
        let mut mirror = open(&server, &cache, &dir);
        mirror.sync().unwrap();
        assert_eq!(masters(&server).len(), 1);
        panic!("on purpose");
    });
    assert!(result.is_err());
    assert!(masters(&server).is_empty(), "{:?}", masters(&server));
}

#[test]
fn a_restarted_server_is_reconnected_with_backoff_and_nothing_is_lost() {
    let Some(mut server) = Sshd::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    let window = repo("assets/examples/llama_kv_alias/a/rank0/match1-occ1");
    copy_tree(&window, &dump.join("rank0/match1-occ1"));
    let cache = work.path().join("cache");
    let mut mirror = open(&server, &cache, &dump);
    mirror.sync().unwrap();
    assert!(mirror.connected());

    server.stop();
    // Dumps land while the server is away.
    copy_tree(&window, &dump.join("rank1/match1-occ1"));
    wait_for("the master to notice", || !mirror.connected());
    let error = mirror.sync().unwrap_err();
    assert!(
        matches!(error, RemoteError::ConnectionLost { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("127.0.0.1"), "{error}");
    assert!(error.is_transient());

    // Down for two more tries, then back.
    let mut backoff = Backoff::new(
        std::time::Duration::from_millis(50),
        std::time::Duration::from_millis(400),
    );
    for _ in 0..2 {
        std::thread::sleep(backoff.next_delay());
        assert!(mirror.sync().unwrap_err().is_transient());
    }
    server.restart();
    copy_tree(&window, &dump.join("rank2/match1-occ1"));
    let report: SyncReport = loop {
        match mirror.sync() {
            Ok(report) => break report,
            Err(e) if e.is_transient() => std::thread::sleep(backoff.next_delay()),
            Err(e) => panic!("{e}"),
        }
    };
    assert!(report.full, "a reconnection lists everything: {report:?}");
    let mut changed = report.changed.clone();
    changed.sort();
    // Each window is its manifest and the token-row sidecar (rows.f32) it names.
    assert_eq!(
        changed,
        [
            "rank1/match1-occ1/manifest.json",
            "rank1/match1-occ1/rows.f32",
            "rank2/match1-occ1/manifest.json",
            "rank2/match1-occ1/rows.f32"
        ]
        .map(|f| mirror.root().join(f))
    );
    assert_eq!(dump_files(mirror.root()), dump_files(&dump));
    assert!(mirror.connected());
}

/// `dumpview scan SOURCE` with `ssh_command`: (exit code, stderr).
fn scan_error(source: &str, ssh_command: &str, cache: &Path, extra: &[&str]) -> (i32, String) {
    let out = dumpview()
        .args(["scan", source, "--ssh-command", ssh_command, "--cache-dir"])
        .arg(cache)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn each_failure_is_an_error_naming_the_host_and_the_fix() {
    let Some(server) = Sshd::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let dump = work.path().join("dump");
    copy_tree(&repo("assets/examples/llama_kv_alias/a"), &dump);
    let host = format!("127.0.0.1:{}", server.port);

    // An unknown host key: never a prompt; the message names the host and both fixes.
    let unknown =
        server.write_client_config("ssh_config_unknown", "known_hosts_empty", "client_key");
    let command = format!("ssh -F {}", unknown.display());
    let (code, stderr) = scan_error(&server.url(&dump), &command, &cache, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{host}: the host key is not known")),
        "{stderr}"
    );
    assert!(
        stderr.contains("known_hosts") && stderr.contains("--accept-new-host-key"),
        "{stderr}"
    );
    // --accept-new-host-key trusts it and records it.
    let (code, stderr) = scan_error(
        &server.url(&dump),
        &command,
        &cache,
        &["--accept-new-host-key"],
    );
    assert!(code < 2, "{stderr}");
    let recorded = std::fs::read_to_string(server.path().join("known_hosts_empty")).unwrap();
    assert!(recorded.contains("ssh-ed25519"), "{recorded:?}");
    // A changed key is refused even then.
    std::fs::write(
        server.path().join("known_hosts_empty"),
        recorded.replace(
            recorded.split_whitespace().nth(2).unwrap(),
            "AAAAC3NzaC1lZDI1NTE5AAAAIKFaGjnvkd6F8MNkrHCLQ9yGeLJU0LQsn7hCpSYgbDRm",
        ),
    )
    .unwrap();
    let (code, stderr) = scan_error(
        &server.url(&dump),
        &command,
        &cache,
        &["--accept-new-host-key"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("host key has CHANGED"), "{stderr}");

    // A key the server does not know: authentication fails, no password prompt.
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(server.path().join("stranger_key"))
        .status()
        .unwrap();
    assert!(status.success());
    let stranger = server.write_client_config("ssh_config_stranger", "known_hosts", "stranger_key");
    let (code, stderr) = scan_error(
        &server.url(&dump),
        &format!("ssh -F {}", stranger.display()),
        &cache,
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("{host}: authentication failed")),
        "{stderr}"
    );

    let ssh = server.ssh_command();
    // Nothing listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (code, stderr) = scan_error(
        &format!("ssh://127.0.0.1:{port}{}", dump.display()),
        &ssh,
        &cache,
        &[],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("127.0.0.1:{port}: cannot connect")),
        "{stderr}"
    );
    // A path that is not there.
    let missing = dump.join("no such run");
    let (code, stderr) = scan_error(&server.url(&missing), &ssh, &cache, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{host}: {}: no such file or directory on the remote host",
            missing.display()
        )),
        "{stderr}"
    );
    // A directory without dump files: an error, never "no findings".
    let empty = work.path().join("empty");
    std::fs::create_dir_all(empty.join("logs")).unwrap();
    std::fs::write(empty.join("logs/notes.txt"), "nothing here").unwrap();
    let (code, stderr) = scan_error(&server.url(&empty), &ssh, &cache, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no dump file found there or below it"),
        "{stderr}"
    );
    // An ssh program that is not there.
    let (code, stderr) = scan_error(&server.url(&dump), "no-such-ssh-program -F x", &cache, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("cannot run `no-such-ssh-program -F x`"),
        "{stderr}"
    );
    // An option smuggled in as a host.
    let out = dumpview()
        .args([
            "scan",
            "--ssh-command",
            &ssh,
            "--",
            "-oProxyCommand=touch pwned:x",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("starts with `-`"), "{stderr}");
    // A local directory with a colon in its name is read as a host: say how to read it.
    let here = tempfile::tempdir().unwrap();
    copy_tree(&dump, &here.path().join("run:1"));
    let out = dumpview()
        .current_dir(here.path())
        .args(["scan", "run:1", "--ssh-command", &ssh, "--cache-dir"])
        .arg(&cache)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("write ./run:1 to read that"), "{stderr}");
    let out = dumpview()
        .current_dir(here.path())
        .args(["scan", "./run:1"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c < 2));
}

#[test]
fn a_host_without_gnu_find_is_listed_with_stat_and_gives_the_same_answer() {
    let work = tempfile::tempdir().unwrap();
    // A find that knows no -printf (busybox, BSD), and a BSD-style stat and head.
    let tools = work.path().join("tools");
    let bsd = work.path().join("bsd");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::create_dir_all(&bsd).unwrap();
    let write = |path: PathBuf, body: &str| {
        std::fs::write(&path, body).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    write(
        tools.join("find"),
        "#!/bin/sh\nfor a in \"$@\"; do case $a in -printf|-newerct) echo \"find: unknown primary $a\" >&2; exit 1;; esac; done\nexec /usr/bin/find \"$@\"\n",
    );
    write(
        bsd.join("stat"),
        "#!/bin/sh\n[ \"$1\" = -L ] && [ \"$2\" = -f ] || { echo 'stat: illegal option' >&2; exit 1; }\nshift 3; [ \"$1\" = -- ] && shift\nexec /usr/bin/stat -L -c '%i %s %Y' -- \"$@\"\n",
    );
    // And a head without -c: files come one command each.
    write(
        bsd.join("head"),
        "#!/bin/sh\ncase \"$1\" in -c*) echo 'head: illegal option -- c' >&2; exit 1;; esac\nexec /usr/bin/head \"$@\"\n",
    );
    let dump = work.path().join("dump");
    copy_tree(
        &repo("tests/fixtures/msprobe/mlp_md5"),
        &dump.join("msprobe"),
    );
    copy_tree(
        &repo("assets/examples/llama_kv_alias/b"),
        &dump.join("probe"),
    );
    let local = dumpview()
        .args(["scan", "--json"])
        .arg(&dump)
        .output()
        .unwrap();
    let local_json = String::from_utf8(local.stdout).unwrap();
    for (prefix, lister) in [
        (vec![tools.clone()], Lister::GnuStat),
        (vec![tools.clone(), bsd.clone()], Lister::BsdStat),
    ] {
        let Some(server) = Sshd::start_with(support::sshd::SshdSetup {
            path_prefix: prefix,
        }) else {
            return;
        };
        let cache = work.path().join(format!("cache-{lister:?}"));
        let mut mirror = open(&server, &cache, &dump);
        assert_eq!(mirror.lister(), lister);
        let first = mirror.sync().unwrap();
        assert_eq!(dump_files(mirror.root()), dump_files(&dump));
        let again = mirror.sync().unwrap();
        assert!(
            again.full && again.bytes == 0 && again.listed == first.listed,
            "{again:?}"
        );
        drop(mirror);
        let out = dumpview()
            .args([
                "scan",
                "--json",
                &server.url(&dump),
                "--ssh-command",
                &server.ssh_command(),
            ])
            .arg("--cache-dir")
            .arg(&cache)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no GNU find on the remote host; listing with find -exec stat"),
            "{stderr}"
        );
        let mirrored = std::fs::canonicalize(&cache)
            .unwrap()
            .join(format!("127.0.0.1_{}", server.port))
            .join(dump.strip_prefix("/").unwrap());
        let json = String::from_utf8(out.stdout)
            .unwrap()
            .replace(&mirrored.display().to_string(), &dump.display().to_string());
        assert_eq!(json, local_json, "{lister:?}");
    }
}

#[test]
fn saved_tensors_come_on_demand_and_the_cache_evicts_the_least_recently_used() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("b");
    copy_tree(&repo("assets/examples/llama_fp16_overflow/b"), &dump);
    let window = Path::new("rank0/match1-occ1");
    let on_demand = [
        "tensors/logits#1.safetensors",
        "tensors/layers.3.mlp_up#1.safetensors",
        "inputs/layers.0.input_norm#1.pt",
        "inputs/layers.0.rope#1.pt",
    ]
    .map(|f| window.join(f));
    let size = |rel: &Path| std::fs::metadata(dump.join(rel)).unwrap().len();
    let manifest = size(&window.join("manifest.json"));
    let largest = on_demand.iter().map(|p| size(p)).max().unwrap();
    let second = {
        let mut sizes: Vec<u64> = on_demand.iter().map(|p| size(p)).collect();
        sizes.sort();
        sizes[sizes.len() - 2]
    };
    let cache = work.path().join("cache");
    // Room for the manifest, its token-row sidecar and two tensor files, not three; state
    // files take a little.
    let rows = size(&window.join("rows.f32"));
    let mut options = server.options(&cache);
    options.cache_size = manifest + rows + largest + second + 2048;
    let mut mirror = Mirror::open(&server.spec(&dump), &options).unwrap();
    mirror.sync().unwrap();
    let root = mirror.root().to_path_buf();
    let local = |rel: &Path| root.join(rel);
    let [t0, t1, t2, t3] = on_demand.clone().map(|p| local(&p));
    for file in &on_demand {
        assert!(!local(file).exists(), "{} came eagerly", file.display());
    }
    let held = |files: &[&PathBuf]| files.iter().map(|f| f.exists()).collect::<Vec<_>>();
    mirror.fetch(&t0).unwrap();
    assert_eq!(
        std::fs::read(&t0).unwrap(),
        std::fs::read(dump.join(&on_demand[0])).unwrap()
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    mirror.fetch(&t1).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Used again (unchanged remotely: not fetched again): now the most recent.
    mirror.fetch(&t0).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    mirror.fetch(&t2).unwrap();
    assert_eq!(held(&[&t0, &t1, &t2]), [true, false, true]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    mirror.fetch(&t3).unwrap();
    assert_eq!(held(&[&t0, &t1, &t2, &t3]), [false, false, true, true]);
    // The dump file of a live mirror is never evicted.
    assert!(local(&window.join("manifest.json")).is_file());
    // Outside the mirror, and missing remotely: errors that say so.
    let error = mirror.fetch(Path::new("/etc/passwd")).unwrap_err();
    assert!(matches!(error, RemoteError::NotInMirror { .. }), "{error}");
    let error = mirror
        .fetch(&local(&window.join("tensors/none#1.pt")))
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no such file or directory on the remote host"),
        "{error}"
    );
}

#[test]
fn a_report_on_remote_captures_fetches_the_tensors_it_compares_and_matches_the_local_one() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("pair");
    copy_tree(&repo("assets/examples/llama_fp16_overflow"), &dump);
    let report = |a: &str, b: &str, cache: Option<&Path>| {
        let mut command = dumpview();
        command.args(["report", "--json", a, b]);
        if let Some(cache) = cache {
            command
                .args(["--ssh-command", &server.ssh_command(), "--cache-dir"])
                .arg(cache);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.code().is_some_and(|c| c < 2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let (a, b) = (dump.join("a"), dump.join("b"));
    let local = report(&a.display().to_string(), &b.display().to_string(), None);
    let cache = work.path().join("cache");
    let remote = report(&server.url(&a), &server.url(&b), Some(&cache));
    let mirrored = std::fs::canonicalize(&cache)
        .unwrap()
        .join(format!("127.0.0.1_{}", server.port))
        .join(dump.strip_prefix("/").unwrap());
    let canonical = std::fs::canonicalize(&dump).unwrap();
    let remote = remote.replace(
        &mirrored.display().to_string(),
        &canonical.display().to_string(),
    );
    let value: serde_json::Value = serde_json::from_str(&remote).unwrap();
    // Every saved pair of matched records: the first divergence's, then the logits.
    assert_eq!(
        value["tensor_comparisons"].as_array().unwrap().len(),
        2,
        "{remote}"
    );
    let strip_inputs = |text: &str| {
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        // The inputs name the paths as given (an ssh:// URL against a local path).
        v["inputs_a"] = serde_json::Value::Null;
        v["inputs_b"] = serde_json::Value::Null;
        v
    };
    let local = local.replace(
        &dump.display().to_string(),
        &canonical.display().to_string(),
    );
    assert_eq!(strip_inputs(&remote), strip_inputs(&local));
    // Only the compared stages' tensors came; the input sets stay remote.
    for side in ["a", "b"] {
        let window = mirrored.join(side).join("rank0/match1-occ1");
        for stage in ["layers.3.mlp_up#1", "logits#1"] {
            assert!(
                window
                    .join(format!("tensors/{stage}.safetensors"))
                    .is_file()
            );
        }
        assert!(!window.join("inputs").exists());
    }
    // A pair the tensor budget leaves out is not fetched.
    let cache = work.path().join("cache_budget");
    let out = dumpview()
        .args(["report", "--json", "--tensor-budget", "1K"])
        .args([server.url(&a), server.url(&b)])
        .args(["--ssh-command", &server.ssh_command(), "--cache-dir"])
        .arg(&cache)
        .output()
        .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        value["tensor_budget"]["left_out"][0]["stage"], "logits#1",
        "{value}"
    );
    let mirrored = std::fs::canonicalize(&cache)
        .unwrap()
        .join(format!("127.0.0.1_{}", server.port))
        .join(dump.strip_prefix("/").unwrap());
    for side in ["a", "b"] {
        let tensors = mirrored.join(side).join("rank0/match1-occ1/tensors");
        assert!(tensors.join("layers.3.mlp_up#1.safetensors").is_file());
        assert!(!tensors.join("logits#1.safetensors").exists());
    }
}

/// Figures for docs/remote.md: `cargo test --test remote -- --ignored --nocapture figures`.
/// Loopback, so they measure dumpview's and ssh's own costs, not a network's.
#[test]
#[ignore = "timings: run by hand"]
fn figures() {
    use std::time::Instant;
    let Some(server) = Sshd::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    let window = repo("assets/examples/llama_kv_alias/a/rank0/match1-occ1");
    let manifest = std::fs::metadata(window.join("manifest.json"))
        .unwrap()
        .len();
    let (ranks, windows) = (64, 16);
    for rank in 0..ranks {
        for w in 0..windows {
            copy_tree(
                &window,
                &dump.join(format!("rank{rank}/match{}-occ1", w + 1)),
            );
        }
    }
    let files = ranks * windows;
    let cache = work.path().join("cache");
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut mirror = open(&server, &cache, &dump);
    println!("open (master + probe): {:.0} ms", ms(t));
    let t = Instant::now();
    let first = mirror.sync().unwrap();
    println!(
        "first sync of {files} manifests ({:.1} MB, plus tensors left remote): {:.0} ms, {} bytes fetched, listing {} bytes",
        (files as u64 * manifest) as f64 / 1e6,
        ms(t),
        first.bytes,
        first.listing_bytes
    );
    let mut idle = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let r = mirror.sync().unwrap();
        assert!(r.changed.is_empty());
        idle.push((ms(t), r.listing_bytes, r.full));
    }
    println!(
        "idle incremental syncs: {:?} (ms, listing bytes, full)",
        idle
    );
    mirror.request_full_listing();
    let t = Instant::now();
    let r = mirror.sync().unwrap();
    println!(
        "idle full listing of {files}: {:.0} ms, {} listing bytes",
        ms(t),
        r.listing_bytes
    );
    let mut landing = Vec::new();
    let (mut fetched, mut changed_bytes) = (0, 0);
    for i in 0..20 {
        let dir = dump.join(format!("rank{}/match99-occ{}", i % ranks, i + 1));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(window.join("manifest.json"), dir.join(".manifest.json.tmp")).unwrap();
        std::fs::rename(dir.join(".manifest.json.tmp"), dir.join("manifest.json")).unwrap();
        let t = Instant::now();
        let r = mirror.sync().unwrap();
        assert_eq!(r.changed.len(), 1, "{r:?}");
        landing.push(ms(t));
        fetched += r.bytes;
        changed_bytes += manifest;
    }
    landing.sort_by(f64::total_cmp);
    println!(
        "one manifest landing, sync: median {:.0} ms, p95 {:.0} ms; bytes fetched / bytes changed = {fetched} / {changed_bytes} = {:.3}",
        landing[10],
        landing[18],
        fetched as f64 / changed_bytes as f64
    );
    drop(mirror);
    for (what, cache) in [
        ("cold", work.path().join("cold")),
        ("warm", work.path().join("cold")),
    ] {
        let t = Instant::now();
        let (_, json) = scan_json(&server, &cache, &server.url(&dump));
        assert!(json.contains("windows"));
        println!(
            "dumpview scan of the {} manifests over ssh, {what} cache: {:.0} ms",
            files + 20,
            ms(t)
        );
    }
    let t = Instant::now();
    let out = dumpview()
        .args(["scan", "--json"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c < 2));
    println!("dumpview scan of the same, local: {:.0} ms", ms(t));
}

#[test]
fn no_prompt_reaches_the_terminal_even_through_a_proxyjump() {
    let Some(server) = Sshd::shared() else { return };
    if !Path::new("/usr/bin/script").is_file() {
        eprintln!("skipped: no script(1) to give dumpview a terminal");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    copy_tree(&repo("tests/fixtures/msprobe/mlp_nan"), &dump);
    // The jump host's key is unknown. BatchMode does not reach the ssh that ProxyJump
    // starts: a plain `ssh -o BatchMode=yes` asks on the terminal there.
    let d = server.path().display().to_string();
    let config = server.path().join("ssh_config_jump");
    std::fs::write(
        &config,
        format!(
            "Host inner\n  HostName 127.0.0.1\n  Port {p}\n  ProxyJump jump\n\
             Host jump\n  HostName 127.0.0.1\n  Port {p}\n  UserKnownHostsFile {d}/known_hosts_empty\n\
             Host *\n  User {u}\n  IdentityFile {d}/client_key\n  IdentitiesOnly yes\n  \
             UserKnownHostsFile {d}/known_hosts\n  GlobalKnownHostsFile /dev/null\n",
            p = server.port,
            u = server.user,
        ),
    )
    .unwrap();
    let command = format!(
        "{} scan inner:{} --ssh-command 'ssh -F {}' --cache-dir {}",
        std::path::Path::new(support::run::BIN).display(),
        dump.display(),
        config.display(),
        work.path().join("cache").display()
    );
    let out = std::process::Command::new("/usr/bin/script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        !screen.contains("continue connecting"),
        "a prompt appeared:\n{screen}"
    );
    assert!(!screen.to_lowercase().contains("password"), "{screen}");
    assert!(
        screen.contains("inner: the host key is not known"),
        "{screen}"
    );
}

#[test]
fn a_remote_file_is_a_capture_too() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("pair");
    copy_tree(&repo("assets/examples/llama_fp16_overflow"), &dump);
    let cache = work.path().join("cache");
    let remote_args = |command: &mut Command| {
        command
            .args(["--ssh-command", &server.ssh_command(), "--cache-dir"])
            .arg(&cache);
    };
    let manifest = dump.join("b/rank0/match1-occ1/manifest.json");
    // A remote *file* is mirrored alone: the token-row sidecar (rows.f32) its token_rows names
    // is not fetched with it, so the remote summary would lose the rows that the local one
    // reads (a gap of the file mirror, not of this test). The manifest is made one without
    // token rows, as the probe wrote before them, so the two summaries are compared whole.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let kept: Vec<&str> = text
        .split('\n')
        .filter(|line| !line.starts_with(" \"token_rows\": "))
        .collect();
    assert_eq!(
        kept.len() + 1,
        text.split('\n').count(),
        "one token_rows line"
    );
    // The field before it ("input_sets") ended with a comma: the last field now.
    let kept = kept.join("\n").replace(" ],\n}", " ]\n}");
    std::fs::write(&manifest, kept).unwrap();
    std::fs::remove_file(manifest.with_file_name("rows.f32")).unwrap();
    let mut summary = dumpview();
    summary.args(["summary", "--json", &server.scp(&manifest)]);
    remote_args(&mut summary);
    let remote = summary.output().unwrap();
    let local = dumpview()
        .args(["summary", "--json"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert_eq!(remote.status.code(), local.status.code());
    let mirrored = std::fs::canonicalize(&cache)
        .unwrap()
        .join(support::sshd::ALIAS)
        .join(manifest.strip_prefix("/").unwrap());
    assert_eq!(
        String::from_utf8(remote.stdout).unwrap().replace(
            &mirrored.display().to_string(),
            &manifest.display().to_string()
        ),
        String::from_utf8(local.stdout).unwrap()
    );
    // `tensors` takes two remote tensor files.
    let tensor = |side: &str| {
        dump.join(side)
            .join("rank0/match1-occ1/tensors/layers.3.mlp_up#1.safetensors")
    };
    let mut tensors = dumpview();
    tensors.args([
        "tensors",
        "--json",
        &server.url(&tensor("a")),
        &server.url(&tensor("b")),
    ]);
    remote_args(&mut tensors);
    let remote = tensors.output().unwrap();
    let local = dumpview()
        .args(["tensors", "--json"])
        .arg(tensor("a"))
        .arg(tensor("b"))
        .output()
        .unwrap();
    assert_eq!(
        remote.status.code(),
        local.status.code(),
        "{}",
        String::from_utf8_lossy(&remote.stderr)
    );
    let strip = |out: &[u8]| {
        let mut v: serde_json::Value = serde_json::from_slice(out).unwrap();
        v["a"]["path"] = serde_json::Value::Null;
        v["b"]["path"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&remote.stdout), strip(&local.stdout));
}

#[test]
fn dumpviews_ssh_options_win_over_the_users_and_dumpview_ssh_chooses_the_command() {
    let Some(server) = Sshd::shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("dump");
    copy_tree(&repo("assets/examples/llama_kv_alias/a"), &dump);
    let local = dumpview()
        .args(["scan", "--json"])
        .arg(&dump)
        .output()
        .unwrap();
    // The user's own ControlPath (in a directory that does not exist), ControlMaster and
    // BatchMode lose to dumpview's: with theirs, the master could not even bind its socket.
    let theirs = format!(
        "{} -o ControlPath=/nonexistent/dir/%C -o ControlMaster=auto -o BatchMode=no -o ConnectTimeout=1",
        server.ssh_command()
    );
    let out = dumpview()
        .args([
            "scan",
            "--json",
            &server.url(&dump),
            "--ssh-command",
            &theirs,
            "--cache-dir",
        ])
        .arg(work.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        local.status.code(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // $DUMPVIEW_SSH, when --ssh-command is not given.
    let out = dumpview()
        .env(
            dumpview::internals::remote::SSH_COMMAND_ENV,
            server.ssh_command(),
        )
        .args(["scan", "--json", &server.scp(&dump), "--cache-dir"])
        .arg(work.path().join("cache"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        local.status.code(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A DUMPVIEW_SSH that cannot be split is an error naming it.
    let out = dumpview()
        .env(
            dumpview::internals::remote::SSH_COMMAND_ENV,
            "ssh -F 'unclosed",
        )
        .args(["scan", &server.scp(&dump)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("DUMPVIEW_SSH \"ssh -F 'unclosed\": an unclosed quote"),
        "{stderr}"
    );
}
