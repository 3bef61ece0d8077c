//! A real terminal for end-to-end tests: one private tmux server per [`Term`] (a socket in
//! its temp dir, no user config) running the `dumpview` binary under test in a detached
//! session of a fixed size, keys sent with `tmux send-keys`, the screen read back with
//! `tmux capture-pane -p` and polled until it settles ([`Screen`]). Used by tests/e2e_tmux.rs,
//! whose module doc says what the shell around the binary does.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// What the shell around the binary prints when it exits: `[dumpview exited N, tty restored]`.
pub const EXIT_MARK: &str = "dumpview exited";

/// How long any one expectation may take to show on screen.
pub const TIMEOUT: Duration = Duration::from_secs(15);
pub const POLL: Duration = Duration::from_millis(40);

pub fn tmux_available() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!(
            "SKIPPED: tmux is not installed (scripts/test.sh installs it: apt-get install -y tmux)"
        );
    }
    found
}

/// Single-quotes `s` for the shell tmux runs the command with.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// One private tmux server with one session running dumpview.
pub struct Term {
    pub socket: String,
    pub dir: tempfile::TempDir,
}

impl Term {
    /// Starts `dumpview ARGS` in a `cols` x `rows` terminal, with `env` set for it (and
    /// NO_COLOR unset unless given, whatever the environment of the test).
    pub fn start(cols: u16, rows: u16, args: &[&str], env: &[(&str, &str)]) -> Term {
        Term::start_gated(cols, rows, args, env, false)
    }

    /// As [`Term::start`]; with `recorded`, everything the program writes to the terminal
    /// is kept in [`Term::recording`] (`tmux pipe-pane`), from its first byte: the shell
    /// waits for the pipe before it starts the program.
    pub fn start_gated(
        cols: u16,
        rows: u16,
        args: &[&str],
        env: &[(&str, &str)],
        recorded: bool,
    ) -> Term {
        let dir = tempfile::tempdir().expect("temp dir");
        // A private server: its socket lives (and goes) with the temp dir.
        let socket = dir
            .path()
            .join("tmux.sock")
            .to_str()
            .expect("UTF-8 temp path")
            .to_string();
        let conf = dir.path().join("tmux.conf");
        // Keep the pane (and its exit status) after the program ends; no status line, so the
        // pane is the whole window.
        std::fs::write(&conf, "set -g remain-on-exit on\nset -g status off\n")
            .expect("write tmux.conf");
        let mut command = String::from("env -u NO_COLOR");
        for (key, value) in env {
            command.push_str(&format!(" {key}={}", quote(value)));
        }
        command.push(' ');
        command.push_str(&quote(super::run::BIN));
        for arg in args {
            command.push(' ');
            command.push_str(&quote(arg));
        }
        // A small shell around the binary reports its exit status and whether it left the
        // terminal's modes (raw mode, echo, ...) as it found them, then waits for Enter, so
        // the pane's modes can be read after the exit; Enter then ends the pane.
        let gate = if recorded {
            "while [ ! -e go ]; do sleep 0.02; done; "
        } else {
            ""
        };
        let script = format!(
            "{gate}before=$(stty -g); {command}; status=$?; \
             if [ \"$(stty -g)\" = \"$before\" ]; then tty=restored; else tty=CHANGED; fi; \
             printf '[{EXIT_MARK} %d, tty %s]\\n' \"$status\" \"$tty\"; read -r _"
        );
        let term = Term { socket, dir };
        let cols_s = cols.to_string();
        let rows_s = rows.to_string();
        let out = Command::new("tmux")
            .args(["-S", &term.socket, "-f"])
            .arg(&conf)
            .args([
                "new-session",
                "-d",
                "-s",
                "e2e",
                "-x",
                &cols_s,
                "-y",
                &rows_s,
                "-c",
            ])
            .arg(term.dir.path())
            .args(["sh", "-c", &script])
            .env_remove("TMUX")
            .output()
            .expect("run tmux");
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if recorded {
            let log = term.dir.path().join("output.log");
            term.tmux_ok(&[
                "pipe-pane",
                "-O",
                "-t",
                "e2e",
                &format!("cat >> {}", quote(log.to_str().expect("UTF-8 temp path"))),
            ]);
            std::fs::write(term.dir.path().join("go"), "").expect("write go");
        }
        term
    }

    /// Everything the program wrote to the terminal so far (a [`Term::start_gated`] with
    /// `recorded`).
    pub fn recording(&self) -> String {
        String::from_utf8_lossy(
            &std::fs::read(self.dir.path().join("output.log")).unwrap_or_default(),
        )
        .into_owned()
    }

    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-S", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux")
    }

    pub fn tmux_ok(&self, args: &[&str]) -> String {
        let out = self.tmux(args);
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen as plain text, one line per terminal row.
    pub fn screen(&self) -> String {
        self.tmux_ok(&["capture-pane", "-p", "-t", "e2e"])
    }

    /// The visible screen with its SGR escape sequences (colours, bold, reverse).
    pub fn screen_with_escapes(&self) -> String {
        self.tmux_ok(&["capture-pane", "-e", "-p", "-t", "e2e"])
    }

    /// A tmux format of the pane, e.g. `#{pane_dead}`.
    pub fn pane(&self, format: &str) -> String {
        self.tmux_ok(&["display-message", "-p", "-t", "e2e", format])
            .trim()
            .to_string()
    }

    /// Sends tmux key names (`Enter`, `Escape`, `Tab`, `g`, ...), one call.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "e2e"];
        args.extend_from_slice(keys);
        self.tmux_ok(&args);
    }

    /// Types `text` literally.
    pub fn type_text(&self, text: &str) {
        self.tmux_ok(&["send-keys", "-t", "e2e", "-l", text]);
    }

    /// Polls the screen until `check` holds on a settled screen (three identical captures in a
    /// row, so a frame caught half-written is never judged); panics with the last screen after
    /// [`TIMEOUT`].
    pub fn wait(&self, what: &str, check: impl Fn(&Screen) -> bool) -> Screen {
        self.wait_capture(what, false, check)
    }

    /// As [`Term::wait`], on captures with their escape sequences (`capture-pane -e`).
    pub fn wait_escaped(&self, what: &str, check: impl Fn(&Screen) -> bool) -> Screen {
        self.wait_capture(what, true, check)
    }

    pub fn wait_capture(
        &self,
        what: &str,
        escapes: bool,
        check: impl Fn(&Screen) -> bool,
    ) -> Screen {
        self.wait_within(TIMEOUT, what, escapes, check)
    }

    /// As [`Term::wait`] with a `timeout` of its own (a replay starts Python and torch).
    pub fn wait_within(
        &self,
        timeout: Duration,
        what: &str,
        escapes: bool,
        check: impl Fn(&Screen) -> bool,
    ) -> Screen {
        let start = Instant::now();
        let (mut previous, mut same) = (String::new(), 0);
        loop {
            let text = if escapes {
                self.screen_with_escapes()
            } else {
                self.screen()
            };
            same = if text == previous { same + 1 } else { 0 };
            previous.clone_from(&text);
            let screen = Screen { text };
            if same >= 2 && check(&screen) {
                return screen;
            }
            if start.elapsed() > timeout {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; pane dead={}; screen:\n{}",
                    self.pane("#{pane_dead}"),
                    screen.text
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// As [`Term::wait`], without waiting for a settled screen: for a screen that keeps
    /// changing, such as a progress gauge.
    pub fn wait_unsettled(&self, what: &str, check: impl Fn(&Screen) -> bool) -> Screen {
        let start = Instant::now();
        loop {
            let screen = Screen {
                text: self.screen(),
            };
            if check(&screen) {
                return screen;
            }
            if start.elapsed() > TIMEOUT {
                panic!(
                    "timed out after {TIMEOUT:?} waiting for {what}; screen:\n{}",
                    screen.text
                );
            }
            std::thread::sleep(POLL);
        }
    }

    pub fn wait_text(&self, text: &str) -> Screen {
        self.wait(&format!("{text:?} on screen"), |s| s.text.contains(text))
    }

    /// Waits until the workbench has loaded and drawn its timeline.
    pub fn wait_loaded(&self) -> Screen {
        self.wait("the workbench (timeline title)", |s| {
            s.timeline_position().is_some()
        })
    }

    /// Waits until dumpview has exited; returns its exit status and whether the shell around
    /// it found the terminal modes restored (`stty -g` equal before and after).
    pub fn wait_exit(&self) -> (i32, bool) {
        let re = regex::Regex::new(&format!(r"\[{EXIT_MARK} (\d+), tty (\w+)\]")).unwrap();
        let s = self.wait("dumpview to exit", |s| re.is_match(&s.text));
        let c = re.captures(&s.text).unwrap();
        (c[1].parse().unwrap(), &c[2] == "restored")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// One captured screen and what the tests read off it.
pub struct Screen {
    pub text: String,
}

impl Screen {
    /// The same screen with its SGR escape sequences removed.
    pub fn without_escapes(&self) -> Screen {
        let re = regex::Regex::new(r"\x1b\[[0-9;:]*m").unwrap();
        Screen {
            text: re.replace_all(&self.text, "").into_owned(),
        }
    }

    pub fn lines(&self) -> Vec<&str> {
        self.text.lines().collect()
    }

    /// The status bar: the last terminal row (capture-pane prints every row, blank ones too).
    pub fn status(&self) -> String {
        self.lines()
            .last()
            .map_or(String::new(), |l| l.trim_end().to_string())
    }

    /// The first line inside the detail panel: the selected row's `stage#occurrence`.
    pub fn detail_title(&self) -> Option<String> {
        let lines = self.lines();
        // Columns count characters: the box-drawing glyphs are several bytes each.
        let (row, column) = lines
            .iter()
            .enumerate()
            .find_map(|(i, l)| Some((i, l[..l.find("┌ detail ")?].chars().count())))?;
        let inner: String = lines
            .get(row + 1)?
            .chars()
            .skip(column + 1)
            .take_while(|&c| c != '│')
            .collect();
        Some(inner.trim().to_string())
    }

    /// `(selected, rows)` from the timeline title `timeline 75/119 · ...` (selected 1-based).
    pub fn timeline_position(&self) -> Option<(usize, usize)> {
        let re = regex::Regex::new(r"timeline (\d+)/(\d+) ·").unwrap();
        let c = re.captures(&self.text)?;
        Some((c[1].parse().ok()?, c[2].parse().ok()?))
    }

    /// The timeline line holding `key` (as drawn, glyph columns first).
    pub fn timeline_line(&self, key: &str) -> Option<String> {
        let needle = format!(" {key} ");
        self.lines()
            .into_iter()
            .find(|l| l.starts_with('│') && l.contains(&needle))
            .map(str::to_string)
    }

    pub fn shows_detail(&self, key: &str) -> bool {
        self.detail_title().as_deref() == Some(key)
    }
}
