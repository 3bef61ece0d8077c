//! End to end: the real `dumpview` binary driven through a real terminal (tmux).
//!
//! Each test starts its own tmux server (a socket in its temp dir, no user config) with one
//! detached session of a fixed size running the binary, with that temp dir as its working
//! directory (so exported reports land there). Keys go in with `tmux send-keys`; the screen
//! comes back with `tmux capture-pane -p`, polled until the expected text shows on a settled
//! screen (bounded, no fixed sleeps). A small `sh` around the binary prints its exit status and
//! whether `stty -g` is the same as before, then waits for Enter, so a test can read the pane's
//! modes (alternate screen, mouse reporting, cursor) after the exit; `remain-on-exit` keeps the
//! pane to show that its process is gone.
//!
//! Without tmux the tests say so on stderr and pass; `.ci/run` (scripts/test.sh) installs it.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::tmux::{EXIT_MARK, POLL, TIMEOUT, Term, tmux_available};

fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(path)
}

const FIRST_DIVERGENCE: &str = "layers.3.mlp_up#1";

// (a) The demo opens on the first divergence; g, d, f move as documented.
#[test]
fn demo_opens_on_first_divergence_and_keys_jump() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    let s = t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    assert!(s.text.contains("NaN/inf counts differ"), "{}", s.text);
    let (selected, total) = s.timeline_position().expect("timeline title");
    assert_eq!(total, 119, "{}", s.text);
    let line = s
        .timeline_line(FIRST_DIVERGENCE)
        .expect("the divergence row is visible");
    assert!(
        line.starts_with("│!◆"),
        "first divergence row marks: {line:?}"
    );

    t.keys(&["g"]);
    let s = t.wait("g: the first row", |s| {
        s.timeline_position() == Some((1, total))
    });
    assert!(!s.shows_detail(FIRST_DIVERGENCE), "{}", s.text);

    t.keys(&["d"]);
    let s = t.wait("d: back on the first divergence", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    assert_eq!(s.timeline_position(), Some((selected, total)));

    // In this pair B's first non-finite record is the divergent stage itself.
    t.keys(&["G"]);
    t.wait("G: the last row", |s| {
        s.timeline_position() == Some((total, total))
    });
    t.keys(&["f"]);
    let s = t.wait("f: the first non-finite record", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    assert_eq!(s.timeline_position(), Some((selected, total)));
    assert!(
        s.text.contains("0/4"),
        "B's NaN/inf counts in the detail:\n{}",
        s.text
    );
}

// (a') Scan mode: f finds the first non-finite record, d says there is nothing to diff.
#[test]
fn scan_mode_f_finds_the_first_non_finite_and_d_explains() {
    if !tmux_available() {
        return;
    }
    let b = example("llama_fp16_overflow/b");
    let t = Term::start(120, 36, &[b.to_str().unwrap()], &[]);
    let s = t.wait_loaded();
    assert!(s.text.contains(" · scan · "), "{}", s.text);
    t.keys(&["g"]);
    t.wait("g: the first row", |s| {
        s.timeline_position().is_some_and(|(sel, _)| sel == 1)
    });
    t.keys(&["f"]);
    let s = t.wait("f: the first non-finite record", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    let line = s.timeline_line(FIRST_DIVERGENCE).expect("row visible");
    assert!(line.starts_with("│!"), "{line:?}");
    t.keys(&["d"]);
    t.wait_text("no divergence in scan mode");
}

// (b) Regex search: a valid pattern selects a matching row; an invalid one shows its error.
#[test]
fn search_selects_a_match_and_reports_a_bad_regex() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });

    // One key at a time: see `typed_ahead_search_text_is_not_read_as_commands`.
    t.keys(&["/"]);
    t.wait("the search prompt", |s| s.status().starts_with("/▏"));
    t.type_text("k_cache_read");
    t.wait("the typed pattern", |s| {
        s.status().starts_with("/k_cache_read▏")
    });
    t.keys(&["Enter"]);
    let s = t.wait("a k_cache_read row selected", |s| {
        s.detail_title().is_some_and(|k| k.contains("k_cache_read"))
    });
    assert!(
        !s.status().starts_with('/'),
        "prompt closed: {:?}",
        s.status()
    );

    t.keys(&["/"]);
    t.wait("the search prompt", |s| s.status().starts_with("/▏"));
    t.type_text("(");
    t.wait("the typed pattern", |s| s.status().starts_with("/(▏"));
    t.keys(&["Enter"]);
    let s = t.wait("the regex error in the status bar", |s| {
        s.status().starts_with("search: ")
    });
    assert!(s.status().contains("unclosed group"), "{:?}", s.status());
    // The selection stays where the last good search left it.
    assert!(
        s.detail_title().is_some_and(|k| k.contains("k_cache_read")),
        "{}",
        s.text
    );
}

// (c) `e` shows the path first (the working directory), Enter writes the report there and
// says so; a path that cannot be written says where it tried and why, and `e` opens on it.
#[test]
fn export_writes_the_report_to_the_working_directory() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    t.keys(&["e"]);
    // tmux starts the program in the temp dir, possibly under a symbolic link (macOS /tmp).
    let dir = std::fs::canonicalize(t.path()).unwrap();
    let s = t.wait_text("export the first-mismatch report");
    assert!(
        s.text.contains(&format!("to {}/▏", dir.display())),
        "the working directory is proposed:\n{}",
        s.text
    );
    assert!(reports(t.path()).is_empty(), "nothing written before Enter");
    t.keys(&["Enter"]);
    let s = t.wait("the export message", |s| {
        s.status().contains("report exported to")
    });
    let reports: Vec<PathBuf> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("dumpview-report-")
        })
        .collect();
    assert_eq!(reports.len(), 1, "one report for one `e`: {reports:?}");
    let name = reports[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.ends_with(".md"), "{name}");
    assert!(
        s.status().contains(&name),
        "the status names {name}: {:?}",
        s.status()
    );
    let text = std::fs::read_to_string(&reports[0]).unwrap();
    assert!(text.contains("# First-mismatch report"), "{text}");
    assert!(text.contains(FIRST_DIVERGENCE), "{text}");

    // A path that cannot be written: where it tried, and why.
    std::fs::write(t.path().join("plain"), "").unwrap();
    let bad = dir.join("plain/r.md");
    t.keys(&["e"]);
    t.wait_text("export the first-mismatch report");
    t.keys(&["C-u"]);
    t.wait_text("to ▏");
    t.type_text(bad.to_str().unwrap());
    t.wait_text("r.md▏");
    t.keys(&["Enter"]);
    let s = t.wait("the failure", |s| s.text.contains("export failed: "));
    let said = s.text.replace('\n', " ");
    assert!(
        said.contains(&format!(
            "could not create {}: Not a directory",
            bad.display()
        )),
        "{}",
        s.text
    );
    // The prompt stays open on the failed path, to be corrected (issue 31, item 7).
    let s = t.wait_text("export the first-mismatch report");
    assert!(
        s.text.contains(&format!("to {}▏", bad.display())),
        "the prompt stays on the failed path:\n{}",
        s.text
    );
    // One send: the terminal may deliver Esc and q in one read, which crossterm parses as Alt+q;
    // the workbench splits it back into the two presses (a quick Esc-q over ssh does the same).
    t.keys(&["Escape", "q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

// (d) Two captures by absolute path: the stride conflicts are counted, and Enter on the alias
// panel jumps the timeline to the member.
#[test]
fn alias_panel_counts_conflicts_and_jumps_to_a_member() {
    if !tmux_available() {
        return;
    }
    let a = example("llama_kv_alias/a");
    let b = example("llama_kv_alias/b");
    assert!(a.is_absolute());
    let t = Term::start(120, 36, &[a.to_str().unwrap(), b.to_str().unwrap()], &[]);
    let s = t.wait_loaded();
    let title = s
        .lines()
        .into_iter()
        .find(|l| l.contains("storage aliases"))
        .expect("alias panel")
        .to_string();
    assert!(title.contains("6 conflicts"), "{title:?}");
    // Start away from the k_cache rows so the jump is visible.
    t.keys(&["g"]);
    t.wait("g: the first row", |s| {
        s.timeline_position().is_some_and(|(sel, _)| sel == 1)
    });
    t.keys(&["Tab"]);
    t.keys(&["Enter"]);
    let s = t.wait("a k_cache member selected", |s| {
        s.detail_title().is_some_and(|k| k.contains("k_cache"))
    });
    let key = s.detail_title().unwrap();
    let (selected, _) = s.timeline_position().unwrap();
    assert!(selected > 1, "the timeline moved: {}", s.text);
    let line = s.timeline_line(&key).expect("the member's row is visible");
    assert!(
        line.chars().nth(3) == Some('X'),
        "a stride-conflict member: {line:?}"
    );
}

// (d') The diagnosis banner under the header says what the kv_alias pair's diagnosis
// concludes; D walks its chain: the writer first, in its window.
#[test]
fn the_diagnosis_banner_reads_and_d_walks_to_the_writer() {
    if !tmux_available() {
        return;
    }
    let a = example("llama_kv_alias/a");
    let b = example("llama_kv_alias/b");
    let t = Term::start(120, 36, &[a.to_str().unwrap(), b.to_str().unwrap()], &[]);
    let s = t.wait_loaded();
    let banner = s.lines()[2].to_string();
    assert!(
        banner.starts_with("Diagnosis (D): B's `layers.0.k_cache_read#1` (first divergence) reads"),
        "{}",
        s.text
    );
    assert!(
        banner.trim_end().ends_with('…'),
        "cut to the width: {banner:?}"
    );
    // It opens on the first divergence, the reader; D goes back to its writer.
    assert_eq!(s.detail_title().as_deref(), Some("layers.0.k_cache_read#1"));
    t.keys(&["D"]);
    let s = t.wait("D: the writer selected", |s| {
        s.shows_detail("layers.0.k_cache_write#1")
    });
    // The status line (two rows here: the address follows the record) names the step.
    let status = status_rows(&s);
    assert!(
        status.starts_with("writer 1/")
            && status.contains(": B rank 0 `layers.0.k_cache_write#1` (seq ")
            && status.contains("storage 13 on cpu, bytes ["),
        "{}",
        s.text
    );
    let line = s
        .timeline_line("layers.0.k_cache_write#1")
        .expect("the writer's row is visible");
    assert!(line.contains('X'), "a stride-conflict member: {line:?}");
    t.keys(&["D"]);
    let s = t.wait("D: the reader selected", |s| {
        s.shows_detail("layers.0.k_cache_read#1")
    });
    assert!(
        status_rows(&s).starts_with("reader, origin 2/"),
        "{}",
        s.text
    );
}

/// The status bar's rows below the strip plot's bottom border, joined.
fn status_rows(s: &support::tmux::Screen) -> String {
    let lines = s.lines();
    let border = lines
        .iter()
        .rposition(|l| l.starts_with('└'))
        .expect("the strip's border");
    lines[border + 1..]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ")
}

// (e) Help opens and closes; q quits with status 0 and leaves the terminal as it found it.
#[test]
fn help_overlay_then_quit_restores_the_terminal() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    t.wait_loaded();
    // While running: alternate screen and mouse reporting on.
    assert_eq!(t.pane("#{alternate_on}"), "1");
    assert_eq!(t.pane("#{mouse_any_flag}"), "1");
    t.keys(&["?"]);
    let s = t.wait_text("help (? or Esc closes)");
    assert!(s.text.contains("first divergence"), "{}", s.text);
    t.keys(&["Escape"]);
    let s = t.wait("the help closed", |s| {
        !s.text.contains("help (? or Esc closes)")
    });
    assert!(s.timeline_position().is_some(), "still running: {}", s.text);
    assert_eq!(t.pane("#{pane_dead}"), "0");
    t.keys(&["q"]);
    let (status, tty_restored) = t.wait_exit();
    assert_eq!(status, 0, "exit status");
    assert!(
        tty_restored,
        "stty -g differs after the exit: raw mode or echo left changed"
    );
    // Restored: back on the normal screen, mouse reporting off, the cursor shown, and nothing
    // of the workbench left on the normal screen (only the shell's exit line).
    assert_eq!(t.pane("#{alternate_on}"), "0", "alternate screen left");
    assert_eq!(
        t.pane("#{mouse_any_flag}"),
        "0",
        "mouse any-event reporting off"
    );
    assert_eq!(t.pane("#{mouse_sgr_flag}"), "0", "SGR mouse mode off");
    assert_eq!(t.pane("#{cursor_flag}"), "1", "cursor visible");
    let after = t.screen();
    let left: Vec<&str> = after
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.contains(EXIT_MARK))
        .collect();
    assert!(left.is_empty(), "the normal screen holds {left:?}");
    // The pane's process is gone once the shell around it ends.
    t.keys(&["Enter"]);
    let start = Instant::now();
    while t.pane("#{pane_dead}") != "1" {
        assert!(
            start.elapsed() < TIMEOUT,
            "the pane did not end:\n{}",
            t.screen()
        );
        std::thread::sleep(POLL);
    }
}

// (f) Below the minimum size a message says so; growing the terminal brings the workbench back.
#[test]
fn tiny_terminal_says_so_and_resizing_recovers() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(50, 12, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    let s = t.wait("the size message", |s| {
        s.text
            .replace('\n', " ")
            .contains("needs a terminal of at least")
    });
    assert!(s.text.replace('\n', " ").contains("50x12"), "{}", s.text);
    t.tmux_ok(&["resize-window", "-t", "e2e", "-x", "120", "-y", "36"]);
    let s = t.wait("the workbench after resize", |s| {
        s.shows_detail(FIRST_DIVERGENCE) && s.timeline_position().is_some()
    });
    assert!(!s.text.contains("needs a terminal"), "{}", s.text);
    // And back down: the message again, still running.
    t.tmux_ok(&["resize-window", "-t", "e2e", "-x", "58", "-y", "20"]);
    t.wait("the size message again", |s| {
        s.text.replace('\n', " ").contains("this one is 58x20")
    });
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

// (g) NO_COLOR: no colour escapes at all, the glyphs still there.
#[test]
fn no_color_draws_glyphs_without_colour_escapes() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(
        120,
        36,
        &["demo", "--pair", "llama_fp16_overflow"],
        &[("NO_COLOR", "1")],
    );
    let escaped = t
        .wait_escaped("the first divergence selected", |s| {
            s.without_escapes().shows_detail(FIRST_DIVERGENCE)
        })
        .text;
    let colours = colour_sgr(&escaped);
    assert!(
        colours.is_empty(),
        "colour SGR codes under NO_COLOR: {colours:?}"
    );
    assert!(
        escaped.contains('!') && escaped.contains('◆'),
        "glyphs present:\n{escaped}"
    );
    // Emphasis stays, as bold/reverse.
    assert!(
        escaped.contains("\x1b[1m") || escaped.contains(";1m") || escaped.contains("[1;"),
        "bold present"
    );

    // The same screen with colour on does use colour codes, so the check above can fail.
    let coloured = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    let escaped = coloured
        .wait_escaped("the first divergence selected", |s| {
            s.without_escapes().shows_detail(FIRST_DIVERGENCE)
        })
        .text;
    let colours = colour_sgr(&escaped);
    assert!(
        !colours.is_empty(),
        "the detector sees the colours of a normal run"
    );
}

/// The SGR parameter lists in `text` that set a colour (foreground or background, 8/16/256 or
/// true colour). Resets to the default colour (39, 49) and attributes (bold, reverse) pass.
fn colour_sgr(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\x1b\[([0-9;:]*)m").unwrap();
    re.captures_iter(text)
        .map(|c| c[1].to_string())
        .filter(|params| {
            params.split([';', ':']).any(|p| {
                matches!(
                    p.parse::<u32>(),
                    Ok(30..=37 | 40..=47 | 90..=97 | 100..=107 | 38 | 48 | 58)
                )
            })
        })
        .collect()
}

// The bug this guards against, reported and not fixed here (src/ is not ours): keys queued
// together are all translated with the state before any is applied, so text typed or pasted
// right after `/` runs as commands (`e` exports, `r`/`d`/`k` move, Enter toggles the wide
// detail) instead of going into the search prompt. Run with `cargo test --test e2e_tmux --
// --ignored` to reproduce.
#[test]
fn typed_ahead_search_text_is_not_read_as_commands() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    t.keys(&["/k_cache_read", "Enter"]);
    let s = t.wait("a k_cache_read row selected", |s| {
        s.detail_title().is_some_and(|k| k.contains("k_cache_read"))
    });
    let exported = std::fs::read_dir(t.path()).unwrap().filter(|e| {
        e.as_ref()
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("dumpview-report-")
    });
    assert_eq!(
        exported.count(),
        0,
        "the e's of the pattern exported reports:\n{}",
        s.text
    );
}

// A second bug, reported and not fixed here: when A and B share no rank (so no window pairs),
// the workbench opens empty and `r` or `l` panics on `windows[app.window]` (src/app/mod.rs,
// Action::NextRank / Action::NextWindow) with exit status 101. Run with `--ignored`.
#[test]
fn rank_and_window_keys_survive_a_pair_without_common_ranks() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let window = dir.path().join("rank1/match1-occ1");
    std::fs::create_dir_all(&window).unwrap();
    let text = std::fs::read_to_string(example("llama_kv_alias/b/rank0/match1-occ1/manifest.json"))
        .unwrap();
    assert!(text.contains("\n \"rank\": 0,\n"));
    std::fs::write(
        window.join("manifest.json"),
        text.replacen("\n \"rank\": 0,\n", "\n \"rank\": 1,\n", 1),
    )
    .unwrap();
    let a = example("llama_kv_alias/a");
    let t = Term::start(
        120,
        36,
        &[a.to_str().unwrap(), dir.path().to_str().unwrap()],
        &[],
    );
    t.wait_text("┌ detail");
    for key in ["r", "l"] {
        t.keys(&[key]);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !t.screen().contains(EXIT_MARK),
            "`{key}` ended dumpview:\n{}",
            t.screen()
        );
    }
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// The exported reports in `dir`.
fn reports(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("dumpview-report-")
        })
        .collect()
}

// (h) `t` on the first divergence compares its saved tensors of both captures: the popup shows
// the verdict, the metrics and the histogram; Esc closes it; `e` exports them in the report.
#[test]
fn t_compares_the_saved_tensors_and_the_report_includes_them() {
    if !tmux_available() {
        return;
    }
    let a = example("llama_fp16_overflow/a");
    let b = example("llama_fp16_overflow/b");
    let t = Term::start(120, 36, &[a.to_str().unwrap(), b.to_str().unwrap()], &[]);
    t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    t.keys(&["t"]);
    let s = t.wait("the tensor comparison popup", |s| {
        s.text.contains("allclose") && s.text.contains("max_abs_diff")
    });
    for expected in [
        "tensors · rank 0 · layers.3.mlp_up#1",
        "allclose NO: 318 of 5504 mismatch",
        "max_abs_diff    127.91015625 at [5, 100]",
        "positions DIFFER",
        "|a-b| by decade",
        "!fin",
    ] {
        assert!(s.text.contains(expected), "{expected:?} in:\n{}", s.text);
    }
    t.keys(&["Escape"]);
    let s = t.wait("the popup closed", |s| !s.text.contains("allclose"));
    assert!(
        s.shows_detail(FIRST_DIVERGENCE),
        "still running:\n{}",
        s.text
    );
    t.keys(&["e"]);
    t.wait_text("export the first-mismatch report");
    t.keys(&["Enter"]);
    t.wait("the export message", |s| {
        s.status().contains("report exported to")
    });
    let found = reports(t.path());
    assert_eq!(found.len(), 1, "{found:?}");
    let text = std::fs::read_to_string(&found[0]).unwrap();
    assert!(text.contains("## Tensor comparisons"), "{text}");
    assert!(text.contains("### Rank 0: `layers.3.mlp_up#1`"), "{text}");
    assert!(
        text.contains("allclose        NO: 318 of 5504 mismatch"),
        "{text}"
    );
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// Copies directory `from` into `to`, recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Writes a safetensors file of one float32 tensor `key` of `elements` zeros as a sparse
/// file (a header, then a hole); false when the file system stores the hole.
#[cfg(unix)]
fn sparse_safetensors(path: &Path, key: &str, elements: u64) -> bool {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let mut header = format!(
        r#"{{"{key}":{{"dtype":"F32","shape":[{elements}],"data_offsets":[0,{}]}}}}"#,
        4 * elements
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&(header.len() as u64).to_le_bytes())
        .unwrap();
    file.write_all(header.as_bytes()).unwrap();
    file.set_len(8 + header.len() as u64 + 4 * elements)
        .unwrap();
    file.metadata().unwrap().blocks() < 1024
}

// (i) Esc while a comparison runs cancels it: the gauge shows the progress, then the status
// says it was cancelled and no result popup opens. The saved tensors are swapped for sparse
// files of 2^30 elements, so the comparison runs long enough to be seen and cancelled.
#[cfg(unix)]
#[test]
fn esc_cancels_a_running_tensor_comparison() {
    if !tmux_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for side in ["a", "b"] {
        copy_dir(
            &example("llama_fp16_overflow").join(side),
            &dir.path().join(side),
        );
        let file = dir
            .path()
            .join(side)
            .join("rank0/match1-occ1/tensors/layers.3.mlp_up#1.safetensors");
        if !sparse_safetensors(&file, FIRST_DIVERGENCE, 1 << 30) {
            eprintln!("SKIPPED: the temp file system does not keep sparse files");
            return;
        }
    }
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let t = Term::start(100, 30, &[a.to_str().unwrap(), b.to_str().unwrap()], &[]);
    t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    t.keys(&["t"]);
    t.wait_unsettled("the progress gauge with its total", |s| {
        s.text.contains("comparing layers.3.mlp_up#1: ")
            && s.text.contains("/1.1G elements — Esc cancels")
    });
    t.keys(&["Escape"]);
    let s = t.wait("the cancel message", |s| {
        s.status().starts_with("tensor comparison cancelled")
    });
    assert!(
        !s.text.contains("comparing layers.3.mlp_up#1") && !s.text.contains("allclose"),
        "no gauge, no result popup:\n{}",
        s.text
    );
    // Nothing runs now: q quits at once.
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// Watch mode (issue 12): the workbench following a directory while a script writes
/// manifests into it; the new window and its first non-finite record appear on screen
/// without a key press, and the header says the watch is on.
#[test]
fn watch_shows_a_landing_window_and_its_first_non_finite_record_without_a_key() {
    if !tmux_available() {
        return;
    }
    let dumps = tempfile::tempdir().unwrap();
    let root = dumps.path().to_str().unwrap().to_string();
    let term = Term::start(140, 35, &["--watch", &root], &[]);
    term.wait_text("watch: on · 1 source");
    // Lands as the probe writes: a temporary file renamed into place.
    let window = dumps.path().join("rank0/match1-occ1");
    std::fs::create_dir_all(&window).unwrap();
    let manifest = example("llama_fp16_overflow/b/rank0/match1-occ1/manifest.json");
    std::fs::copy(manifest, window.join(".manifest.json.tmp")).unwrap();
    std::fs::rename(
        window.join(".manifest.json.tmp"),
        window.join("manifest.json"),
    )
    .unwrap();
    let screen = term.wait_loaded();
    assert!(screen.text.contains("119 records"), "{}", screen.text);
    // Scan mode opens on the first non-finite record: its stage heads the detail panel.
    let screen = term.wait("the first non-finite stage in the detail", |s| {
        s.detail_title()
            .is_some_and(|t| t.contains("layers.3.mlp_up#1"))
    });
    assert!(screen.text.contains("update 2"), "{}", screen.text);
    term.keys(&["q"]);
    assert_eq!(term.wait_exit().0, 0);
}

// The tester's note: an input that cannot be read opened the workbench on a "cannot open"
// popup and exited 0. Now the error goes to stderr and the exit status is 2, before the
// terminal is taken: no alternate screen, no mouse reporting was ever switched on.
#[test]
fn an_unreadable_input_exits_2_before_taking_the_terminal() {
    if !tmux_available() {
        return;
    }
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("manifest.json"), "this is not json\n").unwrap();
    let t = Term::start_gated(100, 30, &[bad.path().to_str().unwrap()], &[], true);
    let (status, tty_restored) = t.wait_exit();
    assert_eq!(status, 2, "exit status:\n{}", t.screen());
    assert!(tty_restored);
    let screen = t.screen();
    assert!(
        screen.contains("dumpview: error: ") && screen.contains("not a valid manifest"),
        "{screen}"
    );
    let written = t.recording();
    for (mode, escape) in [
        ("alternate screen", "\x1b[?1049h"),
        ("mouse capture", "\x1b[?1000h"),
    ] {
        assert!(
            !written.contains(escape),
            "the {mode} was switched on: {written:?}"
        );
    }
    assert!(written.contains("not a valid manifest"), "{written:?}");

    // The recording does see those modes when the workbench opens, so the check can fail.
    let good = Term::start_gated(100, 30, &["demo"], &[], true);
    good.wait_loaded();
    good.keys(&["q"]);
    assert_eq!(good.wait_exit(), (0, true));
    assert!(good.recording().contains("\x1b[?1049h"));
}

// Esc in the main view closes what is open and otherwise does nothing; only q quits.
#[test]
fn esc_in_the_main_view_does_not_quit() {
    if !tmux_available() {
        return;
    }
    let t = Term::start(120, 36, &["demo", "--pair", "llama_fp16_overflow"], &[]);
    t.wait_loaded();
    t.keys(&["Escape"]);
    t.keys(&["Escape"]);
    t.keys(&["j"]);
    let s = t.wait("j moved after two Esc", |s| {
        s.timeline_position().is_some_and(|(sel, _)| sel == 76)
    });
    assert!(!s.text.contains(EXIT_MARK), "{}", s.text);
    assert_eq!(t.pane("#{pane_dead}"), "0");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

// Item 19: load warnings are read in the workbench (`w`), not by quitting for `dumpview scan`.
#[test]
fn w_shows_the_load_warnings_and_esc_closes_them() {
    if !tmux_available() {
        return;
    }
    let bad =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad/truncated_mid_record.json");
    let t = Term::start(120, 36, &[bad.to_str().unwrap()], &[]);
    let s = t.wait_loaded();
    assert!(
        s.status()
            .starts_with("1 load warning (1 lost evidence): w lists them"),
        "{:?}",
        s.status()
    );
    t.keys(&["w"]);
    let s = t.wait_text("load warnings: 1 (1 lost evidence, 0 notes)");
    for expected in [
        "LOST EVIDENCE",
        "truncated_mid_record.json",
        "stops being a valid manifest at byte 3914",
    ] {
        assert!(s.text.contains(expected), "{expected:?} in\n{}", s.text);
    }
    // The view owns the keys: j does not move the timeline behind it.
    t.keys(&["j"]);
    t.keys(&["Escape"]);
    let s = t.wait("the view closed", |s| !s.text.contains("LOST EVIDENCE"));
    assert_eq!(s.timeline_position().map(|p| p.0), Some(1), "{}", s.text);
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

// Item 22: the workbench takes the diff's tolerances, and `a` filters the timeline to the rows
// with a finding.
#[test]
fn tolerances_on_the_workbench_and_the_filter() {
    if !tmux_available() {
        return;
    }
    let a = example("llama_chunked_prefill/a");
    let b = example("llama_chunked_prefill/b");
    let t = Term::start(
        140,
        40,
        &[
            "--rtol",
            "1e-9",
            "--atol",
            "0",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
        ],
        &[],
    );
    let s = t.wait("the first divergence under the tight tolerances", |s| {
        s.shows_detail("layers.0.k_cache_read#1")
    });
    assert!(
        s.lines()[0]
            .trim_end()
            .ends_with("tolerances: rtol 1e-9 atol 0e0"),
        "{}",
        s.text
    );
    let (_, total) = s.timeline_position().unwrap();
    assert_eq!(total, 119);
    t.keys(&["a"]);
    let s = t.wait("the filtered timeline", |s| {
        s.text.contains(" hidden · (a shows all)")
    });
    let (_, shown) = s.timeline_position().unwrap();
    assert!(shown < total, "{}", s.text);
    assert!(s.shows_detail("layers.0.k_cache_read#1"), "{}", s.text);
    assert!(
        !s.text.contains(" runner.input_ids#1 "),
        "an agreeing pair is hidden:\n{}",
        s.text
    );
    t.keys(&["a"]);
    t.wait("every row again", |s| {
        s.timeline_position().map(|p| p.1) == Some(total)
    });
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// llama_fp16_overflow copied under `work` and named through `server` as two sources (an
/// address and an alias), with the cache directory to use.
fn remote_pair(server: &support::sshd::Sshd, work: &Path) -> (String, String, PathBuf) {
    support::copy_tree(&example("llama_fp16_overflow"), &work.join("pair"));
    (
        server.url(&work.join("pair/a")),
        server.scp(&work.join("pair/b")),
        work.join("cache"),
    )
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// `args` followed by the options that reach `server` and cache into `cache`.
fn remote_args(server: &support::sshd::Sshd, cache: &Path, args: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    all.extend([
        "--ssh-command".to_string(),
        server.ssh_command(),
        "--cache-dir".to_string(),
        cache.display().to_string(),
    ]);
    all
}

// The workbench on two remote captures (a real sshd on 127.0.0.1): one snapshot of each
// through one connection, opened on the first divergence; the master ends when it quits.
#[test]
fn the_workbench_opens_two_remote_captures_and_ends_their_connection_at_quit() {
    if !tmux_available() {
        return;
    }
    let Some(server) = support::sshd::Sshd::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let (a, b, cache) = remote_pair(&server, work.path());
    let args = remote_args(&server, &cache, &[&a, &b]);
    let t = Term::start(120, 36, &as_strs(&args), &[]);
    let s = t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    assert!(s.text.contains("NaN/inf counts differ"), "{}", s.text);
    // Two sources on one host through two spellings (an address, an alias): one master each.
    assert_eq!(server.masters().len(), 2, "{:?}", server.masters());
    // The saved tensors were not fetched with the snapshot: t fetches them, then compares,
    // with the answer of the local files.
    let cached = |side: &str| {
        support::files_under(&cache)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains(&format!("pair/{side}/")))
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .count()
    };
    assert_eq!((cached("a"), cached("b")), (0, 0));
    t.keys(&["t"]);
    let s = t.wait("the tensor comparison popup", |s| {
        s.text.contains("allclose") && s.text.contains("max_abs_diff")
    });
    for expected in [
        "tensors · rank 0 · layers.3.mlp_up#1",
        "allclose NO: 318 of 5504 mismatch",
        "max_abs_diff    127.91015625 at [5, 100]",
    ] {
        assert!(s.text.contains(expected), "{expected:?} in:\n{}", s.text);
    }
    assert_eq!((cached("a"), cached("b")), (1, 1));
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    let (status, restored) = t.wait_exit();
    assert_eq!(status, 0);
    assert!(restored);
    let deadline = Instant::now() + TIMEOUT;
    while !server.masters().is_empty() {
        assert!(Instant::now() < deadline, "{:?}", server.masters());
        std::thread::sleep(POLL);
    }
}

// The same through a watch (`--watch A --vs B`, both remote): `t` fetches the followed
// captures' saved tensors too, and gives the local answer.
#[test]
fn t_on_a_remote_watch_fetches_the_saved_tensors_it_compares() {
    if !tmux_available() {
        return;
    }
    let Some(server) = support::sshd::Sshd::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let (a, b, cache) = remote_pair(&server, work.path());
    let args = remote_args(&server, &cache, &["--watch", &a, "--vs", &b]);
    let t = Term::start(120, 36, &as_strs(&args), &[]);
    t.wait("the first divergence selected", |s| {
        s.shows_detail(FIRST_DIVERGENCE)
    });
    t.keys(&["t"]);
    let s = t.wait("the tensor comparison popup", |s| {
        s.text.contains("allclose") && s.text.contains("max_abs_diff")
    });
    for expected in [
        "tensors · rank 0 · layers.3.mlp_up#1",
        "allclose NO: 318 of 5504 mismatch",
        "max_abs_diff    127.91015625 at [5, 100]",
    ] {
        assert!(s.text.contains(expected), "{expected:?} in:\n{}", s.text);
    }
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

// ---- `p`: replaying a stage's operator on its captured input set (issue 13) ----

/// How long a replay may take on screen: Python and torch start first (about 3 s here, more
/// on a loaded machine).
const REPLAY_TIMEOUT: Duration = Duration::from_secs(90);

const NORM: &str = "layers.0.input_norm#1";

/// The environment a replay test runs dumpview with: the venv's Python, and the state and
/// cache directories (history, outputs) in the test's own `dir`.
fn replay_env(dir: &Path) -> Vec<(String, String)> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    vec![
        ("DUMPVIEW_PYTHON".into(), python.display().to_string()),
        (
            "XDG_STATE_HOME".into(),
            dir.join("state").display().to_string(),
        ),
        (
            "XDG_CACHE_HOME".into(),
            dir.join("cache").display().to_string(),
        ),
    ]
}

fn venv_has_torch() -> bool {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let found = Command::new(&python)
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {} cannot import torch", python.display());
    }
    found
}

/// `file.py:function` of tests/python/replay_candidates.py, absolute (the workbench runs in
/// a temp dir).
fn candidate(function: &str) -> String {
    format!(
        "{}/tests/python/replay_candidates.py:{function}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Selects `stage` with the search prompt.
fn search_stage(t: &Term, stage: &str) {
    t.keys(&["/"]);
    t.type_text(&format!("^{}$", regex::escape(stage)));
    t.keys(&["Enter"]);
    t.wait(&format!("{stage} selected"), |s| s.shows_detail(stage));
}

// (r) p on layers.0.input_norm#1 of the float32 pair: the dialog, the candidate typed, Enter;
// the log streams, the verdict opens with its metrics and histogram, the history and the
// outputs are where they are said to be, and the exported report has the replay.
#[test]
fn p_replays_a_stage_and_its_verdict_opens_and_goes_into_the_report() {
    if !tmux_available() || !venv_has_torch() {
        return;
    }
    let a = example("llama_kv_alias/a");
    let b = example("llama_kv_alias/b");
    let dir = tempfile::tempdir().unwrap();
    let env = replay_env(dir.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let t = Term::start(100, 30, &[a.to_str().unwrap(), b.to_str().unwrap()], &env);
    t.wait_loaded();
    let s = t.wait_text("p replay");
    let line = s.timeline_line(NORM).expect("the row");
    assert!(line.contains('↻'), "{line:?}");
    search_stage(&t, NORM);
    t.keys(&["p"]);
    let s = t.wait_text("replay · rank 0 · layers.0.input_norm#1");
    assert!(
        s.text.contains("reference  builtin:rms_norm") && s.text.contains("side       A"),
        "{}",
        s.text
    );
    t.type_text(&candidate("rms_norm_eps_after"));
    t.keys(&["Enter"]);
    let s = t.wait_within(REPLAY_TIMEOUT, "the verdict", false, |s| {
        s.text
            .contains("ERROR  Relative error is greater than 0.001")
    });
    for expected in [
        "replay · rank 0 · layers.0.input_norm#1 · A · msprobe",
        "max_abs_diff    0.00464477 at [4, 206]",
        "first mismatch  [0, 0]",
        "|a-b| by decade",
    ] {
        assert!(s.text.contains(expected), "{expected:?} in:\n{}", s.text);
    }
    // The history file and the outputs, where the environment says.
    let history =
        std::fs::read_to_string(dir.path().join("state/dumpview/replay_history.json")).unwrap();
    assert!(history.contains("rms_norm_eps_after"), "{history}");
    let replays: Vec<PathBuf> = std::fs::read_dir(dir.path().join("cache/dumpview/replays"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert!(replays[0].join("verdict.json").is_file());
    // Esc closes it; the report exported from the session holds the replay.
    t.keys(&["Escape"]);
    t.wait("the popup closed", |s| !s.text.contains("ERROR  Relative"));
    t.keys(&["e"]);
    t.wait_text("export the first-mismatch report");
    t.keys(&["Enter"]);
    // The long path wraps the message onto two lines.
    t.wait("the export message", |s| {
        s.text.contains("report exported to")
    });
    let found = reports(t.path());
    assert_eq!(found.len(), 1, "{found:?}");
    let report = std::fs::read_to_string(&found[0]).unwrap();
    assert!(
        report.contains("## Replays")
            && report.contains("### `layers.0.input_norm#1`: error (msprobe)"),
        "{report}"
    );
    // p again: the dialog opens on what was run, and Up finds it in the history too.
    t.keys(&["p"]);
    let s = t.wait_text("replay · rank 0 · layers.0.input_norm#1");
    assert!(s.text.contains("rms_norm_eps_after"), "{}", s.text);
    // (Esc and q in one write would read as Alt-q.)
    t.keys(&["Escape"]);
    t.wait("the dialog closed", |s| !s.text.contains("› candidate"));
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// The processes in process group `pgid` that are alive (zombies, already dead, left out):
/// read from /proc, so the other tests' Pythons never count.
#[cfg(target_os = "linux")]
fn alive_in_group(pgid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp, ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2].parse() == Ok(pgid) {
            out.push(pid);
        }
    }
    out
}

// (s) Esc while a replay runs: a candidate that never finishes (and has a child of its own)
// is cancelled, and nothing of its process group is left; nor after q while one runs.
#[cfg(target_os = "linux")]
#[test]
fn esc_cancels_a_running_replay_and_kills_its_process_group() {
    if !tmux_available() || !venv_has_torch() {
        return;
    }
    let a = example("llama_kv_alias/a");
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("slow.json");
    let mut env = replay_env(dir.path());
    env.push(("REPLAY_SLOW_PID".into(), pid_file.display().to_string()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let t = Term::start(100, 30, &[a.to_str().unwrap()], &env);
    t.wait_loaded();
    search_stage(&t, NORM);
    t.keys(&["p"]);
    let s = t.wait_text("replay · rank 0 · layers.0.input_norm#1");
    assert!(
        !s.text.contains("side "),
        "one capture: no side field\n{}",
        s.text
    );
    t.type_text(&candidate("rms_norm_slow"));
    t.keys(&["Enter"]);
    // The candidate is running once it wrote its pid and its group.
    let deadline = Instant::now() + REPLAY_TIMEOUT;
    let written = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the slow candidate never started:\n{}",
            t.screen()
        );
        std::thread::sleep(POLL);
    };
    let ids: serde_json::Value = serde_json::from_str(&written).unwrap();
    let (pid, pgid, child) = (
        ids["pid"].as_i64().unwrap() as i32,
        ids["pgid"].as_i64().unwrap() as i32,
        ids["child"].as_i64().unwrap() as i32,
    );
    let mut group = alive_in_group(pgid);
    group.sort_unstable();
    assert!(
        group.contains(&pid) && group.contains(&child),
        "python {pid} and its sleep {child} in group {pgid}: {group:?}"
    );
    assert_eq!(pid, pgid, "replay_op.py leads its own process group");
    let s = t.wait_unsettled("the running replay's log", |s| {
        s.text.contains("replay_op.py's log") && s.text.contains("Esc cancels")
    });
    assert!(s.text.contains("rms_norm_slow"), "{}", s.text);
    t.keys(&["Escape"]);
    let s = t.wait("the cancel message", |s| {
        s.status()
            .starts_with("replay of layers.0.input_norm#1 cancelled")
    });
    assert!(
        !s.text.contains("Esc cancels"),
        "the popup closed:\n{}",
        s.text
    );
    let deadline = Instant::now() + TIMEOUT;
    while !alive_in_group(pgid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left in group {pgid}: {:?}",
            alive_in_group(pgid)
        );
        std::thread::sleep(POLL);
    }
    // A cancelled replay leaves no output directory behind.
    let replays = dir.path().join("cache/dumpview/replays");
    let left: Vec<_> = std::fs::read_dir(&replays)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");

    // Again, the candidate recalled from the history with Up; then q quits while it runs:
    // dumpview exits and takes the whole group with it.
    std::fs::remove_file(&pid_file).unwrap();
    t.keys(&["p"]);
    t.wait_text("› candidate");
    t.keys(&["Up"]);
    t.wait_text("rms_norm_slow▏");
    t.keys(&["Enter"]);
    let deadline = Instant::now() + REPLAY_TIMEOUT;
    let written = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            break text;
        }
        assert!(Instant::now() < deadline, "not started:\n{}", t.screen());
        std::thread::sleep(POLL);
    };
    let ids: serde_json::Value = serde_json::from_str(&written).unwrap();
    let pgid = ids["pgid"].as_i64().unwrap() as i32;
    assert!(!alive_in_group(pgid).is_empty());
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
    assert_eq!(
        alive_in_group(pgid),
        Vec::<i32>::new(),
        "left after quitting"
    );
}

// (t) A remote capture's input set replays on its host (a real OpenSSH server on loopback),
// through the capture's own ssh options, with the Python the dialog names there.
#[test]
fn p_on_a_remote_capture_replays_on_its_host() {
    if !tmux_available() || !venv_has_torch() {
        return;
    }
    let Some(server) = support::sshd::Sshd::start() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    support::copy_tree(&example("llama_kv_alias/a"), &work.path().join("a"));
    let source = server.url(&work.path().join("a"));
    let cache = work.path().join("cache");
    let env = replay_env(work.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let t = Term::start(
        100,
        30,
        &[
            &source,
            "--ssh-command",
            &server.ssh_command(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
        &env,
    );
    t.wait_loaded();
    search_stage(&t, NORM);
    t.keys(&["p"]);
    let s = t.wait_text("replay · rank 0 · layers.0.input_norm#1");
    // The input set is named where it lies, on the host, not by the local cache's copy
    // (issue 31, item 4).
    let on_host = format!("A: {source}/rank0/match1-occ1");
    assert!(s.text.contains(&on_host), "{on_host} not in\n{}", s.text);
    let input_set = s.text.lines().find(|l| l.contains("input set")).unwrap();
    assert!(!input_set.contains(cache.to_str().unwrap()), "{input_set}");
    t.type_text(&candidate("rms_norm_eps_after"));
    // Tab to the python field (candidate, reference, standard, python): the remote host's
    // interpreter, here the venv's (the host is this machine).
    t.keys(&["Tab", "Tab", "Tab"]);
    t.wait_text("› python");
    t.type_text(&format!("{}/.venv/bin/python", env!("CARGO_MANIFEST_DIR")));
    t.keys(&["Enter"]);
    t.wait_within(REPLAY_TIMEOUT, "the verdict", false, |s| {
        s.text
            .contains("ERROR  Relative error is greater than 0.001")
    });
    // Its end says where it ran.
    t.keys(&["End"]);
    let s = t.wait_text("ran        on ");
    assert!(s.text.contains("ran        on 127.0.0.1:"), "{}", s.text);
    // The outputs came back into the local cache of replays.
    let replays: Vec<PathBuf> = std::fs::read_dir(work.path().join("cache/dumpview/replays"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert!(replays[0].join("candidate.pt").is_file());
    t.keys(&["Escape"]);
    t.wait("the popup closed", |s| !s.text.contains("ERROR  Relative"));
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// The processes whose command line names `needle` (the case matrix's batch Pythons name
/// their matrix directory), from /proc.
#[cfg(target_os = "linux")]
fn alive_naming(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        });
        let named = std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle));
        if named && !zombie {
            out.push(pid);
        }
    }
    out
}

// (u) From a replay's verdict, c plans a case matrix on its input set; Enter runs it and the
// board fills in: a candidate wrong only for bfloat16 fails there alone, and the matrix is on
// disk under .dumpview/cases of the working directory; Enter shows a case's metrics.
#[test]
fn c_plans_and_runs_a_case_matrix_from_a_replay_and_the_board_shows_its_outcomes() {
    if !tmux_available() || !venv_has_torch() {
        return;
    }
    let a = example("llama_kv_alias/a");
    let b = example("llama_kv_alias/b");
    let dir = tempfile::tempdir().unwrap();
    let env = replay_env(dir.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let t = Term::start(120, 40, &[a.to_str().unwrap(), b.to_str().unwrap()], &env);
    t.wait_loaded();
    search_stage(&t, NORM);
    t.keys(&["p"]);
    t.wait_text("› candidate");
    t.type_text(&candidate("rms_norm_wrong_in_bf16"));
    t.keys(&["Enter"]);
    t.wait_within(REPLAY_TIMEOUT, "the verdict", false, |s| {
        s.text.contains("PASS  Max abs error") && s.text.contains("c case matrix")
    });
    t.keys(&["c"]);
    let s = t.wait_text("case matrix · rank 0 · layers.0.input_norm#1 · A");
    for expected in [
        "baseline   x       tensor float32 [12, 256] stride [256, 1]".to_string(),
        "› dtype      float16,bfloat16,float32▏".to_string(),
        "  layout     x=transposed,strided".to_string(),
        format!(
            "vs         {} agrees with DUMP at layers.0.input_norm#1",
            b.display()
        ),
    ] {
        assert!(s.text.contains(&expected), "{expected:?} in:\n{}", s.text);
    }
    t.keys(&["Enter"]);
    let s = t.wait_within(REPLAY_TIMEOUT, "the finished board", false, |s| {
        s.text
            .contains("case matrix layers.0.input_norm-1 · rank 0")
            && s.text.contains("r runs missing")
    });
    for expected in [
        "baseline   ✓ captured",
        "dtype      ✓ float16     ✗ bfloat16    ✓ float32 =",
        "layout[x]  ✓ transposed  ✓ strided",
        "✓ pass 4 · ✗ mismatch 1",
        "follows    every numerical mismatch is dtype=bfloat16",
    ] {
        assert!(s.text.contains(expected), "{expected:?} in:\n{}", s.text);
    }
    assert!(
        s.status()
            .starts_with("case matrix layers.0.input_norm-1: 4 pass, 1 numerical mismatch · numerical mismatch follows dtype=bfloat16"),
        "{}",
        s.status()
    );
    let matrix = t.path().join(".dumpview/cases/layers.0.input_norm-1");
    assert!(matrix.join("plan.json").is_file());
    assert!(
        matrix
            .join("cases/dtype=bfloat16/attempt-1/replay.json")
            .is_file()
    );
    // Down to dtype, right to bfloat16, Enter: its metrics.
    t.keys(&["Down"]);
    t.keys(&["Right"]);
    t.keys(&["Enter"]);
    let s = t.wait_text("case dtype=bfloat16 · layers.0.input_norm-1");
    assert!(
        s.text.contains("ERROR  Cosine similarity") && s.text.contains("|a-b| by decade"),
        "{}",
        s.text
    );
    t.keys(&["Escape"]);
    t.wait("the case closed", |s| {
        !s.text.contains("case dtype=bfloat16 ·")
    });
    t.keys(&["Escape"]);
    t.wait("the board closed", |s| {
        !s.text.contains("case matrix layers")
    });
    // c again: the same board, and the same name would be numbered for a new matrix.
    t.keys(&["c"]);
    t.wait_text("case matrix layers.0.input_norm-1 · rank 0");
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

// (v) x cancels a running matrix: the batch's Python is gone, the finished case stays filed,
// and r runs what is left; q while a matrix runs takes its Python with it.
#[cfg(target_os = "linux")]
#[test]
fn x_cancels_a_running_case_matrix_and_q_takes_its_python_along() {
    if !tmux_available() || !venv_has_torch() {
        return;
    }
    let a = example("llama_kv_alias/a");
    let dir = tempfile::tempdir().unwrap();
    let env = replay_env(dir.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let t = Term::start(120, 40, &[a.to_str().unwrap()], &env);
    t.wait_loaded();
    search_stage(&t, NORM);
    t.keys(&["p"]);
    t.wait_text("› candidate");
    t.type_text(&candidate("rms_norm_hangs_on_eps"));
    t.keys(&["Enter"]);
    t.wait_within(REPLAY_TIMEOUT, "the verdict", false, |s| {
        s.text.contains("c case matrix")
    });
    t.keys(&["c"]);
    t.wait_text("› dtype");
    // Only an eps axis: the baseline passes, eps=1e-5 sleeps ten minutes.
    t.keys(&["C-u"]);
    t.keys(&["Down"]);
    t.keys(&["C-u"]);
    for _ in 0..3 {
        t.keys(&["Down"]);
    }
    t.wait_text("› option");
    t.type_text("eps=1e-5");
    t.keys(&["Enter"]);
    let matrix = t.path().join(".dumpview/cases/layers.0.input_norm-1");
    let needle = matrix.display().to_string();
    let s = t.wait_within(REPLAY_TIMEOUT, "the hanging case running", false, |s| {
        s.text.contains("▶ 1e-5") && s.text.contains("✓ captured")
    });
    assert!(s.text.contains("x cancels"), "{}", s.text);
    assert!(!alive_naming(&needle).is_empty(), "the batch runs");
    t.keys(&["x"]);
    let s = t.wait("the cancel", |s| {
        s.status()
            .starts_with("case matrix layers.0.input_norm-1 cancelled: 1 case(s) filed before")
    });
    assert!(
        s.text.contains("? 1e-5"),
        "missing evidence now:\n{}",
        s.text
    );
    let deadline = Instant::now() + TIMEOUT;
    while !alive_naming(&needle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left: {:?}",
            alive_naming(&needle)
        );
        std::thread::sleep(POLL);
    }
    assert!(
        matrix
            .join("cases/baseline/attempt-1/replay.json")
            .is_file()
    );
    // r runs what is left; q while it runs: dumpview exits and its Python with it.
    t.keys(&["r"]);
    t.wait_within(REPLAY_TIMEOUT, "the rest running", false, |s| {
        s.text.contains("▶ 1e-5")
    });
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
    let deadline = Instant::now() + TIMEOUT;
    while !alive_naming(&needle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left after q: {:?}",
            alive_naming(&needle)
        );
        std::thread::sleep(POLL);
    }
}

// (t) The token × stage view: `b` opens it on the first bad token of a chunked prefill whose
// second chunk computes RoPE from position 0; Enter shows both rows; Esc and q leave.
#[test]
fn b_shows_the_first_bad_token_of_a_chunk_and_enter_its_rows() {
    if !tmux_available() {
        return;
    }
    let pair = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/token_examples/tokens_bug_in_one_chunk");
    let (a, b) = (pair.join("a"), pair.join("b"));
    let t = Term::start(110, 32, &[a.to_str().unwrap(), b.to_str().unwrap()], &[]);
    t.wait_text("timeline");
    t.keys(&["b"]);
    let s = t.wait_text("first bad token: position 5, token id 611 at layers.0.q_rope#1");
    let row = s
        .text
        .lines()
        .find(|l| l.contains("layers.0.q_rope#1  "))
        .unwrap_or_else(|| panic!("{}", s.text));
    assert!(
        row.contains(".  .  .  .  .  *"),
        "positions 0-4 agree, 5 is marked: {row}"
    );
    t.keys(&["Enter"]);
    let s = t.wait_text("rows at position 5:");
    assert!(
        s.text.contains("A nonfinite 0 max_abs 0.7443928 "),
        "{}",
        s.text
    );
    assert!(
        s.text.contains("B nonfinite 0 max_abs 0.7459986 "),
        "{}",
        s.text
    );
    t.keys(&["Escape"]);
    t.wait("the view closed", |s| !s.text.contains("first bad token:"));
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// The tree line of the record the screen's reverse-video cursor is on, from a capture with
/// escapes: the line holding a reverse (SGR 7) attribute inside the tree pane, escapes removed.
fn reversed_line(escaped: &str) -> Option<String> {
    let sgr = regex::Regex::new(r"\x1b\[([0-9;:]*)m").unwrap();
    escaped
        .lines()
        .find(|l| {
            sgr.replace_all(l, "").starts_with('│')
                && sgr
                    .captures_iter(l)
                    .any(|c| c[1].split(';').any(|p| p == "7"))
        })
        .map(|l| sgr.replace_all(l, "").into_owned())
}

// Issue 28 item 6: on the hooked MiniLM capture pair (float32 vs bfloat16), `m` shows the
// module tree; with `encoder` folded, `d` opens the path to the first divergence that
// `dumpview diff --json` names in its headline and puts the cursor on it.
#[test]
fn the_module_tree_walks_to_the_first_divergence_of_the_hooked_minilm_pair() {
    if !tmux_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm_hooked");
    let (a, b) = (root.join("a"), root.join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (_, doc, err) = support::run::json(&["diff", "--json", a, b]);
    let target = doc["diff"]["headline"]["key"]
        .as_str()
        .unwrap_or_else(|| panic!("a headline key: {err}"))
        .to_string();
    // Its modules, as the tree names them: dotted, with a hook's `.output.N` tail one name.
    let (stage, occurrence) = target.rsplit_once('#').unwrap();
    let mut names: Vec<&str> = stage.split('.').collect();
    let tail = names.split_off(names.len() - 2).join(".");
    let record = if tail.starts_with("output.") || tail.starts_with("input.") {
        format!("{tail}#{occurrence}")
    } else {
        names.push(&tail[..tail.find('.').unwrap()]);
        format!("{}#{occurrence}", &tail[tail.find('.').unwrap() + 1..])
    };
    assert!(names.len() >= 3, "{target}: a module path");

    let t = Term::start(140, 40, &[a, b], &[]);
    t.wait("the first divergence selected", |s| s.shows_detail(&target));
    t.keys(&["m"]);
    t.wait("the tree", |s| s.text.contains("┌ tree "));
    // Fold the top module holding it, and move off it.
    t.keys(&["g"]);
    t.keys(&["j"]);
    t.keys(&["Left"]);
    let folded = format!("▸ {}", names[0]);
    let s = t.wait("the top module folded", |s| s.text.contains(&folded));
    // The tree pane, left of the detail (whose title names the record too; the diagnosis
    // banner above it may name it as well).
    let pane = |s: &support::tmux::Screen| -> String {
        s.lines()
            .iter()
            .filter(|l| l.starts_with('│'))
            .filter_map(|l| l.split("││").next())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(!pane(&s).contains(&record), "{}", s.text);
    t.keys(&["g"]);
    t.wait("the cursor off the divergence", |s| {
        !s.shows_detail(&target)
    });

    t.keys(&["d"]);
    let s = t.wait("d: the first divergence selected", |s| {
        s.shows_detail(&target)
    });
    // The path is open, one level deeper per module, and the record is under the last.
    let lines = s.lines();
    let mut at = 0;
    for (depth, name) in names.iter().enumerate() {
        let open = format!("{}▾ {name}", " ".repeat(2 * depth));
        at += lines[at..]
            .iter()
            .position(|l| l.contains(&open))
            .unwrap_or_else(|| panic!("{open:?} below line {at}:\n{}", s.text));
    }
    let line = lines[at..]
        .iter()
        .find(|l| l.contains(&record))
        .unwrap_or_else(|| panic!("{record:?} under its module:\n{}", s.text));
    assert!(
        line.starts_with("│ ◆"),
        "the first divergence's mark: {line:?}"
    );
    let s = t.wait_escaped("the cursor on the record", |s| {
        reversed_line(&s.text).is_some_and(|l| l.contains(&record))
    });
    let cursor = reversed_line(&s.text).unwrap();
    assert!(
        cursor.contains(&format!("{}  {record}", " ".repeat(2 * names.len()))),
        "indented under its module: {cursor:?}"
    );
    t.keys(&["q"]);
    assert_eq!(t.wait_exit(), (0, true));
}

/// Issue 31, item 14: Ctrl-C while the captures still load gives no answer, and says so as a
/// shell does for an interrupted command: exit 130 (was 0), the terminal restored.
#[test]
fn ctrl_c_during_a_load_exits_130() {
    if !tmux_available() {
        return;
    }
    // A capture large enough to load for a while in a debug build (40,000 records, each on
    // its own storage): the workbench opens on its loading gauge.
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_fp16_overflow/a/rank0/match1-occ1/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(example).unwrap()).unwrap();
    let template = manifest["records"].as_array().unwrap().clone();
    let records: Vec<serde_json::Value> = (0..40_000u64)
        .map(|i| {
            let mut r = template[i as usize % template.len()].clone();
            r["seq"] = i.into();
            r["stage"] = format!("s{i}").into();
            r["occurrence"] = 1.into();
            r["tensor_file"] = serde_json::Value::Null;
            r["storage_id"] = i.into();
            r["storage_ptr"] = ((i + 1) << 24).into();
            r["data_ptr"] = ((i + 1) << 24).into();
            r
        })
        .collect();
    manifest["records"] = records.into();
    manifest["input_sets"] = serde_json::json!([]);
    manifest.as_object_mut().unwrap().remove("token_rows");
    let window = dir.path().join("big/rank0/match1-occ1");
    std::fs::create_dir_all(&window).unwrap();
    std::fs::write(
        window.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    let t = Term::start(100, 30, &[dir.path().join("big").to_str().unwrap()], &[]);
    t.wait_text("loading (q quits)");
    t.keys(&["C-c"]);
    assert_eq!(t.wait_exit(), (130, true));
}
