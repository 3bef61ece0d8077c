//! The statistic names, in the manifest's order (`stat_names`, the keys of `records[].stats`):
//! the one list every writer and reader takes them from.

/// Calls `$callback!` with the statistic names as string literals, in the manifest's order:
/// for tables that need literals (`concat!`), such as a reader's `"name": ` prefixes. Everything
/// else reads [`STAT_NAMES`], which is made from this list.
///
/// ```
/// macro_rules! count { ($($name:literal),*) => { [$($name),*].len() } }
/// assert_eq!(dump_stats::with_stat_names!(count), dump_stats::STAT_NAMES.len());
/// ```
#[macro_export]
macro_rules! with_stat_names {
    ($callback:ident) => {
        $callback!(
            "nan_count",
            "inf_count",
            "finite_count",
            "max_abs",
            "min",
            "max",
            "mean",
            "l2",
            "pos_checksum"
        )
    };
}

macro_rules! array {
    ($($name:literal),*) => {
        [$($name),*]
    };
}

/// The per-row statistics of a token row, in the sidecar's column order (the crate's docs,
/// "Per-row statistics of token rows").
pub const ROW_STAT_NAMES: [&str; 5] = [
    "nonfinite_count",
    "max_abs",
    "sum",
    "sum_squares",
    "row_checksum",
];

/// The statistic names, in the manifest's order.
pub const STAT_NAMES: [&str; Stat::ALL.len()] = with_stat_names!(array);

/// The value statistics (every statistic but the counts), in the manifest's order: what a
/// comparison compares and a report lists, and what a reader nulls when it is not a number.
pub const VALUE_STAT_NAMES: [&str; Stat::VALUES.len()] = {
    let mut out = [""; Stat::VALUES.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = Stat::VALUES[i].name();
        i += 1;
    }
    out
};

/// One statistic; the discriminant is its position in [`STAT_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stat {
    /// `nan_count`: NaN elements (an integer).
    NanCount,
    /// `inf_count`: +inf or −inf elements (an integer).
    InfCount,
    /// `finite_count`: numel − nan_count − inf_count (an integer).
    FiniteCount,
    /// `max_abs`: max(|min|, |max|) over the finite elements.
    MaxAbs,
    /// `min`: the smallest finite element.
    Min,
    /// `max`: the largest finite element.
    Max,
    /// `mean`: Σ_F x / finite_count.
    Mean,
    /// `l2`: sqrt(Σ_F x²).
    L2,
    /// `pos_checksum`: Σ_F x[r,c]·u(r)·v(c) ([`crate::weights`]).
    PosChecksum,
}

impl Stat {
    /// Every statistic, in the manifest's order.
    pub const ALL: [Stat; 9] = [
        Stat::NanCount,
        Stat::InfCount,
        Stat::FiniteCount,
        Stat::MaxAbs,
        Stat::Min,
        Stat::Max,
        Stat::Mean,
        Stat::L2,
        Stat::PosChecksum,
    ];

    /// The counts, which every statistic before [`Stat::MaxAbs`] is.
    pub const COUNTS: [Stat; 3] = [Stat::NanCount, Stat::InfCount, Stat::FiniteCount];

    /// The value statistics (every statistic but the counts), in the manifest's order.
    pub const VALUES: [Stat; 6] = [
        Stat::MaxAbs,
        Stat::Min,
        Stat::Max,
        Stat::Mean,
        Stat::L2,
        Stat::PosChecksum,
    ];

    /// Its name in the manifest.
    pub const fn name(self) -> &'static str {
        STAT_NAMES[self as usize]
    }

    /// Its position in [`STAT_NAMES`] (and [`Stat::ALL`]).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The statistic named `name`, if any.
    pub fn from_name(name: &str) -> Option<Stat> {
        Stat::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether it is a count (an integer, never null).
    pub const fn is_count(self) -> bool {
        (self as usize) < Stat::COUNTS.len()
    }

    /// Its position in [`VALUE_STAT_NAMES`] (and [`Stat::VALUES`]).
    ///
    /// # Panics
    /// For a count (at compile time where called in a constant).
    pub const fn value_index(self) -> usize {
        assert!(!self.is_count(), "a count is not a value statistic");
        self as usize - Stat::COUNTS.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_agree() {
        for (i, stat) in Stat::ALL.into_iter().enumerate() {
            assert_eq!(stat.index(), i);
            assert_eq!(Stat::from_name(stat.name()), Some(stat));
        }
        assert_eq!(Stat::COUNTS[..], Stat::ALL[..Stat::COUNTS.len()]);
        assert_eq!(Stat::VALUES[..], Stat::ALL[Stat::COUNTS.len()..]);
        for (i, stat) in Stat::VALUES.into_iter().enumerate() {
            assert_eq!(stat.value_index(), i);
            assert_eq!(VALUE_STAT_NAMES[i], stat.name());
        }
        assert_eq!(Stat::from_name("sum"), None);
    }
}
