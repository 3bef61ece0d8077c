//! `dumpview watch ssh://…` against a real OpenSSH server (tests/support/sshd.rs): manifests
//! landing in the remote directory while it is watched become events, as for a local one, and
//! two remote sources merge into one capture with a warning for the rank they both hold; a
//! windowed dump's saved tensors, which its statistics come from, follow in the background.

mod support;

use std::path::Path;

use serde_json::Value;
use support::sshd::Sshd;
use support::watch::Watch;

/// `dumpview watch SOURCES` through `server`, caching into `cache`, polling every 0.3 s.
fn start(server: &Sshd, cache: &Path, sources: &[String]) -> Watch {
    let mut args: Vec<std::ffi::OsString> = sources.iter().map(Into::into).collect();
    for arg in ["--poll", "0.3", "--timeout", "90", "--ssh-command"] {
        args.push(arg.into());
    }
    args.push(server.ssh_command().into());
    args.push("--cache-dir".into());
    args.push(cache.into());
    Watch::start(args)
}

/// Lands `side`'s llama_fp16_overflow manifest as rank `rank` into `root`, as the probe does.
fn land(root: &Path, side: &str, rank: u32) {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_fp16_overflow")
        .join(side)
        .join("rank0/match1-occ1/manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(example).unwrap()).unwrap();
    manifest["rank"] = rank.into();
    let dir = root.join(format!("rank{rank}/match1-occ1"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".m.tmp"), serde_json::to_vec(&manifest).unwrap()).unwrap();
    std::fs::rename(dir.join(".m.tmp"), dir.join("manifest.json")).unwrap();
}

#[test]
fn a_watched_remote_directory_reports_windows_and_findings_as_they_land() {
    let Some(server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let remote = server.path().join("dumps");
    std::fs::create_dir_all(&remote).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let source = server.url(&remote);
    let watch = start(&server, cache.path(), std::slice::from_ref(&source));
    let connected = watch.next("connected", |e| {
        e["kind"] == "source" && e["state"] == "connected"
    });
    assert_eq!(connected["source"], source);
    land(&remote, "a", 0);
    // Issue 31, item 14: `connected` is said once per start, not again by the first reading.
    let mut connected_again = 0;
    let window = watch.next("window", |e| {
        connected_again += usize::from(e["kind"] == "source" && e["state"] == "connected");
        e["kind"] == "window"
    });
    assert_eq!(
        connected_again, 0,
        "a second `connected` before the first window"
    );
    assert_eq!(
        (window["rank"].clone(), window["records"].clone()),
        (0.into(), 119.into())
    );
    assert_eq!(window["source"], source);
    land(&remote, "b", 1);
    let nonfinite = watch.next("first_nonfinite", |e| {
        e["kind"] == "first_nonfinite" && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["rank"], 1);
    assert_eq!(nonfinite["stage"], "layers.3.mlp_up#1");
}

#[test]
fn two_remote_sources_merge_and_a_rank_they_share_is_said() {
    let Some(server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let (one, two) = (server.path().join("node0"), server.path().join("node1"));
    land(&one, "a", 0);
    land(&two, "a", 1);
    land(&two, "b", 0);
    let cache = tempfile::tempdir().unwrap();
    let sources = [server.url(&one), server.scp(&two)];
    let watch = start(&server, cache.path(), &sources);
    // Windows may come before the clash warning: those seen while waiting for it count.
    let mut seen = Vec::new();
    let clash = watch.next("clash warning", |e| {
        if e["kind"] == "window" {
            seen.push((
                e["source"].as_str().unwrap().to_string(),
                e["rank"].as_u64().unwrap(),
            ));
        }
        e["kind"] == "warning"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("rank 0 is in"))
    });
    assert_eq!(clash["warning_kind"], "note");
    while seen.len() < 3 {
        let w = watch.next("window", |e| e["kind"] == "window");
        seen.push((
            w["source"].as_str().unwrap().to_string(),
            w["rank"].as_u64().unwrap(),
        ));
    }
    seen.sort();
    let mut expected = vec![
        (sources[0].clone(), 0),
        (sources[1].clone(), 0),
        (sources[1].clone(), 1),
    ];
    expected.sort();
    assert_eq!(seen, expected);
}

/// sshd killed mid-watch: the watch says the source is lost and retrying, keeps what it has,
/// and once the server is back it reconnects and catches up with what landed meanwhile.
#[test]
fn a_watch_survives_sshd_killed_and_restarted_and_catches_up() {
    let Some(mut server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let remote = server.path().join("dumps");
    land(&remote, "a", 0);
    let cache = tempfile::tempdir().unwrap();
    let source = server.url(&remote);
    let watch = start(&server, cache.path(), std::slice::from_ref(&source));
    watch.next("window 0", |e| e["kind"] == "window" && e["rank"] == 0);
    server.stop();
    let lost = watch.next("lost", |e| e["kind"] == "source" && e["state"] == "lost");
    assert_eq!(lost["source"], source);
    watch.next("retrying", |e| {
        e["kind"] == "source" && e["state"] == "retrying"
    });
    // Lands while the server is down: nothing can see it yet.
    land(&remote, "b", 1);
    // Down for several tries: each says `retrying`, none says `lost` again (issue 31, item 14).
    let mut tries = 0;
    watch.next("a second retry", |e| {
        assert!(e["state"] != "lost", "`lost` said again: {e}");
        tries += usize::from(e["kind"] == "source" && e["state"] == "retrying");
        tries == 1
    });
    server.restart();
    watch.next("connected again", |e| {
        assert!(e["state"] != "lost", "`lost` said again: {e}");
        e["kind"] == "source" && e["state"] == "connected"
    });
    let nonfinite = watch.next("rank 1's first non-finite", |e| {
        e["kind"] == "first_nonfinite" && e["rank"] == 1 && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["stage"], "layers.3.mlp_up#1");
}

/// Copies `from` into `to` as a windowed run writes it: tensor and task files first, each
/// manifest last, renamed into place.
fn land_windowed(from: &Path, to: &Path) {
    let mut manifests = Vec::new();
    for entry in support::files_under(from) {
        let target = to.join(entry.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        if entry.file_name().unwrap() == "manifest.json" {
            manifests.push((entry, target));
        } else {
            std::fs::copy(&entry, &target).unwrap();
        }
    }
    for (entry, target) in manifests {
        let partial = target.with_file_name(".manifest.json.tmp");
        std::fs::copy(&entry, &partial).unwrap();
        std::fs::rename(&partial, &target).unwrap();
    }
}

/// A windowed dump landing in a watched remote directory: its windows are held until the 32
/// tensor files their statistics come from are fetched (progress as `source` events with
/// `fetch`), then shown with the statistics the local reading gives: rank 1's first
/// non-finite record, and no warning of a missing tensor.
#[test]
fn a_windowed_dump_landing_remotely_has_its_tensors_fetched_in_the_background() {
    let Some(server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let remote = server.path().join("dumps");
    std::fs::create_dir_all(&remote).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let source = server.url(&remote);
    let watch = start(&server, cache.path(), std::slice::from_ref(&source));
    watch.next("connected", |e| {
        e["kind"] == "source" && e["state"] == "connected"
    });
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/windowed/B/l1");
    land_windowed(&fixture, &remote);
    let mut fetched = 0;
    let mut finished = false;
    let nonfinite = watch.next("rank 1's first non-finite", |e| {
        if let Some(fetch) = e.get("fetch") {
            assert_eq!(e["kind"], "source");
            let (done, total) = (fetch["files_done"].as_u64(), fetch["files_total"].as_u64());
            finished = done == total;
            if finished {
                fetched += total.unwrap();
            }
        }
        assert!(
            !(e["kind"] == "warning" && e["warning_kind"] == "lost_evidence"),
            "no window is read before its tensors are in: {e}"
        );
        e["kind"] == "first_nonfinite" && e["rank"] == 1 && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["stage"], "pipeline_mk.out.task1.output.y#1");
    assert_eq!(nonfinite["label"], "window_0001");
    assert!(
        finished,
        "the fetch said it finished before the window was shown"
    );
    let tensors = support::files_under(cache.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pt"))
        .count();
    assert_eq!(
        tensors, 32,
        "every tensor file of the four windows is in the cache"
    );
    assert!(fetched <= 32, "no tensor file fetched twice: {fetched}");
}

/// A watch of a remote directory whose own name and whose window directories hold spaces,
/// quotes, `;`, `$(…)`, backticks and newlines: every window landing under them is an event,
/// and nothing ran on either side.
#[test]
fn a_watch_takes_hostile_directory_names_literally_and_nothing_runs() {
    let Some(server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let root = server
        .path()
        .join("$(touch pwned-root) it's; `touch pwned-tick`\nand more");
    std::fs::create_dir_all(&root).unwrap();
    let names = [
        "with space",
        "quote'd \"double\"",
        "semi;colon && touch pwned-and",
        "$(touch pwned-subst)",
        "new\nline",
        "`touch pwned-backtick`",
        "| touch pwned-pipe",
    ];
    let cache = tempfile::tempdir().unwrap();
    let source = server.url(&root);
    let watch = start(&server, cache.path(), std::slice::from_ref(&source));
    watch.next("connected", |e| {
        e["kind"] == "source" && e["state"] == "connected"
    });
    for name in names {
        land(&root.join(name), "a", 0);
    }
    let mut files = std::collections::BTreeSet::new();
    while files.len() < names.len() {
        let window = watch.next("window", |e| e["kind"] == "window");
        assert_eq!(window["source"], source);
        files.insert(window["file"].as_str().unwrap().to_string());
    }
    for name in names {
        assert!(
            files.iter().any(|f| f.contains(&format!("/{name}/rank0/"))),
            "{name:?} is a window of its own: {files:?}"
        );
    }
    for dir in [server.path().to_path_buf(), cache.path().to_path_buf()] {
        let found = pwned(&dir);
        assert!(found.is_empty(), "something ran: {found:?}");
    }
}

/// Files named `pwned*` anywhere under `dir`.
fn pwned(dir: &Path) -> Vec<std::path::PathBuf> {
    support::entries_under(dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pwned"))
        })
        .collect()
}

/// A remote watch that ends by itself (`--timeout`, `--until-finding`) ends its ssh master and
/// removes its control directory `/tmp/dvssh-<pid>-*`, though its followers still hold the
/// mirrors when main returns.
#[test]
fn a_remote_watch_that_ends_leaves_no_master_and_no_control_directory() {
    let Some(server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let remote = server.path().join("dumps");
    land(&remote, "b", 0);
    let cache = tempfile::tempdir().unwrap();
    for ending in [["--timeout", "2"], ["--until-finding", "--json"]] {
        let mut child = std::process::Command::new(support::run::BIN)
            .arg("watch")
            .arg(server.url(&remote))
            .args(ending)
            .args(["--poll", "0.3", "--ssh-command", &server.ssh_command()])
            .arg("--cache-dir")
            .arg(cache.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "{ending:?}: rank 0 holds an inf");
        let left = support::control_dirs(pid);
        assert!(left.is_empty(), "{ending:?} left {left:?}");
        assert!(server.masters().is_empty(), "{ending:?} left a master");
    }
}

/// A remote dump file replaced by a smaller one, and then the last one deleted: the watch
/// says both (fewer records and the finding cleared; the window removed), though nothing
/// else lands to signal a change.
#[test]
fn a_remote_file_that_shrinks_and_then_goes_is_said() {
    let Some(server) = Sshd::start() else {
        eprintln!("skipped: no sshd");
        return;
    };
    let remote = server.path().join("dumps");
    land(&remote, "b", 0);
    let cache = tempfile::tempdir().unwrap();
    let source = server.url(&remote);
    let watch = start(&server, cache.path(), std::slice::from_ref(&source));
    let nonfinite = watch.next("the first non-finite record", |e| {
        e["kind"] == "first_nonfinite" && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["stage"], "layers.3.mlp_up#1");
    // The first 60 records only, rewritten in place: smaller, and with no inf.
    let path = remote.join("rank0/match1-occ1/manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["records"].as_array_mut().unwrap().truncate(60);
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let window = watch.next("the smaller window", |e| {
        e["kind"] == "window" && e["records"] == 60
    });
    assert_eq!(window["rank"], 0);
    watch.next("the finding cleared", |e| {
        e["kind"] == "first_nonfinite" && e["cleared"] == true
    });
    std::fs::remove_file(&path).unwrap();
    watch.next("the window removed", |e| {
        e["kind"] == "window" && e["removed"] == true
    });
}
