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

/// Copies the tree at `from` into `to` (created).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn dumpview() -> Command {
    Command::cargo_bin("dumpview").unwrap()
}

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
    let Some(server) = Sshd::start() else { return };
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

use dumpview::remote::{Backoff, Lister, Mirror, OVERLAP_BYTES, RemoteError, SETTLE, SyncReport};

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
    let Some(server) = Sshd::start() else { return };
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
    assert_eq!(report.deferred, [local.clone()], "{report:?}");
    assert_eq!(std::fs::read(&local).unwrap(), first);
    settle();
    let report = mirror.sync().unwrap();
    assert_eq!(report.changed, [local.clone()]);
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
    let Some(server) = Sshd::start() else { return };
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
    assert_eq!(report.changed, [local.clone()]);
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
    let Some(server) = Sshd::start() else { return };
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
    assert!(first.full && first.listed == 2, "{first:?}");
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
    let added = mirror.root().join("rank7/match1-occ1/manifest.json");
    assert_eq!(report.changed, [added.clone()]);
    assert_eq!(
        report.bytes,
        std::fs::metadata(window.join("manifest.json"))
            .unwrap()
            .len()
    );
    // A removal shows on the next full listing.
    std::fs::remove_dir_all(dump.join("other")).unwrap();
    mirror.request_full_listing();
    let report = mirror.sync().unwrap();
    assert!(report.full && report.bytes == 0, "{report:?}");
    assert_eq!(report.removed.len(), 1, "{report:?}");
    assert_eq!(dump_files(mirror.root()), dump_files(&dump));
    // A later run (a new mirror on the same cache) fetches nothing that is there already.
    drop(mirror);
    let mut again = open(&server, &cache, &dump);
    let report = again.sync().unwrap();
    assert_eq!((report.bytes, report.changed.len()), (0, 0), "{report:?}");
}
