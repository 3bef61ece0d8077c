//! Parallel layouts (docs/manifest.md, "Parallel layouts"): a window's place in its parallel
//! groups ([`Layout`], from `metadata.parallel`) and how one record relates to the full tensor
//! of its group ([`Shard`], from the record's `shard`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// The axes `arm(parallel=...)` accepts: tensor, context, data, pipeline, expert parallel.
pub const AXES: [&str; 5] = ["tp", "cp", "dp", "pp", "ep"];

/// How one record relates to the full tensor over a parallel group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Shard {
    /// This rank holds a slice along `dim` of the full tensor (`tp:D`, `tp:D@OFFSET/FULL`,
    /// `cp:D`, `cp:D:zigzag`).
    Split {
        /// The group axis (`tp` or `cp`).
        axis: &'static str,
        /// The sliced dimension, counted from the front.
        dim: u32,
        /// Where the slice lies: `None` for an equal slice in group-rank order.
        placement: Placement,
    },
    /// The same values on every rank of the group (`replicated:AXIS`).
    Replicated {
        /// The group axis.
        axis: &'static str,
    },
    /// A partial sum still to be reduced over the group (`partial:AXIS`).
    Partial {
        /// The group axis.
        axis: &'static str,
    },
}

/// Where a [`Shard::Split`] slice lies along its dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// An equal slice at `rank_in_group × local size` of a full size `local × group size`.
    Equal,
    /// `offset` elements into a full size `full` (uneven slices).
    At {
        /// Offset of this rank's first element along the dimension, elements.
        offset: u64,
        /// Size of the full tensor along the dimension, elements.
        full: u64,
    },
    /// Zigzag context parallel: chunks `r` and `2n − 1 − r` of `2n`.
    Zigzag,
}

impl Shard {
    /// The group axis the annotation is over.
    pub fn axis(&self) -> &str {
        match self {
            Shard::Split { axis, .. } | Shard::Replicated { axis } | Shard::Partial { axis } => {
                axis
            }
        }
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Parses the manifest's `shard` string.
    ///
    /// # Errors
    /// A message naming the text when it is none of the documented forms.
    fn from_str(text: &str) -> Result<Shard, String> {
        let refuse = || {
            format!(
                "shard {text:?} is not tp:D, tp:D@OFFSET/FULL, cp:D, cp:D:zigzag, \
                 replicated:AXIS or partial:AXIS"
            )
        };
        let (head, rest) = text.split_once(':').ok_or_else(refuse)?;
        let axis_of = |a: &str| {
            AXES.iter().copied().find(|x| *x == a).ok_or_else(|| {
                format!(
                    "shard {text:?}: axis {a:?} is not one of {} ({head}:AXIS)",
                    AXES.join(", ")
                )
            })
        };
        match head {
            "replicated" => Ok(Shard::Replicated {
                axis: axis_of(rest)?,
            }),
            "partial" => Ok(Shard::Partial {
                axis: axis_of(rest)?,
            }),
            "tp" | "cp" => {
                let number = |s: &str| s.parse::<u64>().map_err(|_| refuse());
                let (dim, placement) = if let Some((dim, at)) = rest.split_once('@') {
                    let (offset, full) = at.split_once('/').ok_or_else(refuse)?;
                    let (offset, full) = (number(offset)?, number(full)?);
                    (dim, Placement::At { offset, full })
                } else if let Some(dim) = rest.strip_suffix(":zigzag") {
                    (dim, Placement::Zigzag)
                } else {
                    (rest, Placement::Equal)
                };
                let dim = u32::try_from(number(dim)?).map_err(|_| refuse())?;
                Ok(Shard::Split {
                    axis: axis_of(head)?,
                    dim,
                    placement,
                })
            }
            _ => Err(refuse()),
        }
    }
}

impl fmt::Display for Shard {
    /// The manifest's form of the annotation.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shard::Replicated { axis } => write!(f, "replicated:{axis}"),
            Shard::Partial { axis } => write!(f, "partial:{axis}"),
            Shard::Split {
                axis,
                dim,
                placement,
            } => match placement {
                Placement::Equal => write!(f, "{axis}:{dim}"),
                Placement::At { offset, full } => write!(f, "{axis}:{dim}@{offset}/{full}"),
                Placement::Zigzag => write!(f, "{axis}:{dim}:zigzag"),
            },
        }
    }
}

impl serde::Serialize for Shard {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Shard {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A window's place in its parallel groups: axis → `(rank_in_group, group_size)`, from
/// `metadata.parallel` (empty when the window recorded none: every stage is per-rank).
pub type Layout = BTreeMap<String, (u32, u32)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_form_reads_and_prints_back() {
        for text in [
            "tp:1",
            "tp:0@8/10",
            "cp:1",
            "cp:2:zigzag",
            "cp:0@4/12",
            "replicated:tp",
            "partial:tp",
        ] {
            let shard: Shard = text.parse().unwrap();
            assert_eq!(shard.to_string(), text);
        }
        assert_eq!(
            "tp:0@8/10".parse::<Shard>().unwrap(),
            Shard::Split {
                axis: "tp",
                dim: 0,
                placement: Placement::At {
                    offset: 8,
                    full: 10
                }
            }
        );
        for bad in [
            "tp",
            "tp:-1",
            "xp:1",
            "replicated:xx",
            "tp:1@8",
            "tp:1:zag",
            "",
        ] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }
}
