//! `D`: walking the diagnosis's chain ([`Diagnosis::chain`]): each press selects the next
//! cited record in the timeline, opening its window (rank, side) the way `d` opens the
//! window of the first divergence, marks it in the alias panel when it is a writer or a
//! reader of an alias finding, and says in the status line which step it is. The diagnosis
//! itself came with the session ([`super::Session::diagnosis`]), computed off the UI thread.

use super::App;
use crate::model::analysis::diagnosis::{Cite, Diagnosis, Role};
use crate::model::present::diagnosis::role_name;

impl App {
    /// The open capture's diagnosis, if a capture is open.
    pub fn diagnosis(&self) -> Option<&Diagnosis> {
        self.loaded.as_ref().map(|l| &l.session.diagnosis)
    }

    /// The cite the last `D` selected, while the timeline's selection is still on it.
    pub fn walked_cite(&self) -> Option<&Cite> {
        let cite = *self.diagnosis()?.chain().get(self.walk?)?;
        let here = self.window_of(cite)? == self.window;
        (here && self.row().is_some_and(|r| r.key == cite.key)).then_some(cite)
    }

    /// The alias panel member (an index as [`App::alias_selected`] counts them) that the
    /// walked cite is, when it is the writer or the reader of an alias finding and the
    /// selection is still on it: the panel marks it even without the focus.
    pub fn walked_alias_member(&self) -> Option<usize> {
        let cite = self.walked_cite()?;
        if !matches!(cite.role, Role::Writer | Role::Reader) {
            return None;
        }
        let side = cite.side.to_ascii_uppercase();
        self.alias_groups()
            .iter()
            .flat_map(|(s, g)| g.members.iter().map(move |m| (*s, m)))
            .position(|(s, m)| s == side && m.key == cite.key)
    }

    /// `D`: selects the next record of the diagnosis's chain (the first after the last one
    /// walked, wrapping around), in its window; with no diagnosis, says so.
    pub(super) fn walk_diagnosis(&mut self) {
        let Some(diagnosis) = self.diagnosis() else {
            return;
        };
        let chain: Vec<Cite> = diagnosis.chain().into_iter().cloned().collect();
        if chain.is_empty() {
            self.message = Some(if diagnosis.found {
                format!("{} (no record cited)", diagnosis.conclusion)
            } else {
                diagnosis.conclusion.clone()
            });
            return;
        }
        let roles: Vec<Vec<Role>> = chain.iter().map(|c| roles_of(diagnosis, c)).collect();
        let addresses: Vec<Option<String>> =
            chain.iter().map(|c| address_of(diagnosis, c)).collect();
        let step = self.walk.map_or(0, |w| (w + 1) % chain.len());
        let cite = &chain[step];
        self.walk = Some(step);
        let Some(window) = self.window_of(cite) else {
            self.message = Some(format!(
                "{} {}/{}: {} is in no window open here",
                role_words(&roles[step]),
                step + 1,
                chain.len(),
                place(cite)
            ));
            return;
        };
        if window != self.window {
            self.select_window(window);
        }
        let Some(row) = self.rows.iter().position(|r| r.key == cite.key) else {
            self.message = Some(format!(
                "{} {}/{}: {} is not in this window's timeline",
                role_words(&roles[step]),
                step + 1,
                chain.len(),
                place(cite)
            ));
            return;
        };
        self.select_near(row);
        let hidden = self.row().is_none_or(|r| r.key != cite.key);
        if let Some(member) = self.walked_alias_member() {
            self.alias_selected = member;
        }
        let layout = cite
            .layout
            .as_ref()
            .map_or(String::new(), |l| format!(", {l}"));
        let hidden = if hidden {
            " (hidden by the filter: a shows all)"
        } else {
            ""
        };
        let address = addresses[step]
            .as_ref()
            .map_or(String::new(), |a| format!(" · {a}"));
        self.message = Some(format!(
            "{} {}/{}: {}{layout}{address}{hidden}",
            role_words(&roles[step]),
            step + 1,
            chain.len(),
            place(cite),
        ));
    }

    /// The window choice holding `cite`'s record: its side's window by source, else the
    /// first window of its rank (a merged group has no one source).
    fn window_of(&self, cite: &Cite) -> Option<usize> {
        let loaded = self.loaded.as_ref()?;
        let source_of = |choice: &super::WindowChoice| match cite.side {
            'a' => Some(
                loaded.session.a.windows[choice.a]
                    .source
                    .display()
                    .to_string(),
            ),
            _ => choice
                .b
                .zip(loaded.session.b.as_ref())
                .map(|(bi, b)| b.windows[bi].source.display().to_string()),
        };
        let windows = &loaded.windows;
        windows
            .iter()
            .position(|w| source_of(w).as_deref() == Some(cite.window.as_str()))
            .or_else(|| windows.iter().position(|w| w.rank == cite.rank))
    }
}

/// Every role the diagnosis gives `cite`'s record (the chain lists each record once: the
/// reader of an alias finding is often the origin too), in finding order.
fn roles_of(diagnosis: &Diagnosis, cite: &Cite) -> Vec<Role> {
    let mut roles = Vec::new();
    for c in diagnosis.findings.iter().flat_map(|f| &f.evidence) {
        if (c.side, c.rank, &c.key) == (cite.side, cite.rank, &cite.key) && !roles.contains(&c.role)
        {
            roles.push(c.role);
        }
    }
    roles
}

/// The bytes a finding citing `cite` as a writer or a reader is about (the alias and the
/// bad-bytes findings name them), in words: the address of writer → address → reader.
fn address_of(diagnosis: &Diagnosis, cite: &Cite) -> Option<String> {
    diagnosis.findings.iter().find_map(|f| {
        let cites = f.evidence.iter().any(|c| {
            (c.side, c.rank, &c.key) == (cite.side, cite.rank, &cite.key)
                && matches!(
                    c.role,
                    Role::Writer | Role::Reader | Role::LastFiniteWriter | Role::FirstNonFinite
                )
        });
        cites
            .then(|| f.address.as_ref().map(|a| a.describe()))
            .flatten()
    })
}

/// `reader, origin`.
fn role_words(roles: &[Role]) -> String {
    roles
        .iter()
        .map(|r| role_name(*r))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `B rank 0 `layers.0.k_cache_write#1` (seq 8)`.
fn place(cite: &Cite) -> String {
    format!(
        "{} rank {} `{}` (seq {})",
        cite.side.to_ascii_uppercase(),
        cite.rank,
        cite.key,
        cite.seq
    )
}
