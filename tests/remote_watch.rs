//! `dumpview watch ssh://…` against a real OpenSSH server (tests/support/sshd.rs): manifests
//! landing in the remote directory while it is watched become events, as for a local one, and
//! two remote sources merge into one capture with a warning for the rank they both hold.

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
    let window = watch.next("window", |e| e["kind"] == "window");
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
    let clash = watch.next("clash warning", |e| {
        e["kind"] == "warning"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("rank 0 is in"))
    });
    assert_eq!(clash["warning_kind"], "note");
    let mut seen = Vec::new();
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
    server.restart();
    watch.next("connected again", |e| {
        e["kind"] == "source" && e["state"] == "connected"
    });
    let nonfinite = watch.next("rank 1's first non-finite", |e| {
        e["kind"] == "first_nonfinite" && e["rank"] == 1 && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["stage"], "layers.3.mlp_up#1");
}
