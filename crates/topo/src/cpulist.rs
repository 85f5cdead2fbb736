//! CPU sets and the two text forms the kernel writes them in.
//!
//! * a *cpulist*, as in `online`, `local_cpulist`, `thread_siblings_list`: comma-separated
//!   decimal numbers and inclusive ranges, `0-7,16-23`; empty text is the empty set;
//! * a *cpumask*, as in `thread_siblings`, `shared_cpu_map`, `node*/cpumap`: comma-separated
//!   32-bit hexadecimal words, most significant word first, `00000000,000000ff`.

use core::fmt;

/// The largest CPU number a cpulist may name: Linux's `NR_CPUS` limit is 8,192; anything beyond
/// is taken as a corrupt file rather than allocated.
pub const CPU_ID_MAX: usize = 1 << 16;

/// A set of CPU numbers.
///
/// Invariant: `ids` is strictly increasing (sorted, no duplicates), every id `<= CPU_ID_MAX`.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    ids: Vec<usize>,
}

/// Why a cpulist or cpumask did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// A piece is not a number or a `low-high` range.
    #[error("bad cpulist item {0:?}")]
    BadItem(String),
    /// A range runs downwards (`7-0`).
    #[error("cpulist range {0}-{1} runs downwards")]
    Reversed(usize, usize),
    /// A CPU number beyond [`CPU_ID_MAX`].
    #[error("CPU number {0} is beyond {CPU_ID_MAX}")]
    TooLarge(usize),
    /// A cpumask word is not 1 to 8 hexadecimal digits.
    #[error("bad cpumask word {0:?}")]
    BadMaskWord(String),
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set from any ids (sorted and deduplicated here).
    pub fn from_ids(ids: impl IntoIterator<Item = usize>) -> Self {
        let mut ids: Vec<usize> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        Self { ids }
    }

    /// Parses a cpulist (`0-7,16-23`); surrounding whitespace and a trailing newline are allowed.
    pub fn parse_list(text: &str) -> Result<Self, CpuListError> {
        let mut ids = Vec::new();
        for item in text.trim().split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (low, high) = match item.split_once('-') {
                Some((l, h)) => (parse_id(l, item)?, parse_id(h, item)?),
                None => {
                    let id = parse_id(item, item)?;
                    (id, id)
                }
            };
            if low > high {
                return Err(CpuListError::Reversed(low, high));
            }
            ids.extend(low..=high);
        }
        Ok(Self::from_ids(ids))
    }

    /// Parses a cpumask (`00000000,000000ff`): 32-bit hex words, most significant first.
    pub fn parse_mask(text: &str) -> Result<Self, CpuListError> {
        let words: Vec<&str> = text.trim().split(',').collect();
        let mut ids = Vec::new();
        for (i, word) in words.iter().rev().enumerate() {
            let word = word.trim();
            let valid = !word.is_empty() && word.len() <= 8;
            let bits = u32::from_str_radix(word, 16)
                .ok()
                .filter(|_| valid)
                .ok_or_else(|| CpuListError::BadMaskWord(word.to_string()))?;
            for bit in 0..32 {
                if bits & (1 << bit) != 0 {
                    let id = i * 32 + bit;
                    if id > CPU_ID_MAX {
                        return Err(CpuListError::TooLarge(id));
                    }
                    ids.push(id);
                }
            }
        }
        Ok(Self::from_ids(ids))
    }

    /// The ids, increasing.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// Iterates the ids, increasing.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.ids.iter().copied()
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: usize) -> bool {
        self.ids.binary_search(&id).is_ok()
    }

    /// The lowest id.
    pub fn first(&self) -> Option<usize> {
        self.ids.first().copied()
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        Self {
            ids: self.iter().filter(|&c| other.contains(c)).collect(),
        }
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.iter().all(|c| other.contains(c))
    }

    /// The set as a cpumask: 32-bit hex words, most significant first (`00000000,000000ff`),
    /// the form `/proc/irq/N/smp_affinity` takes. The empty set is `0`.
    pub fn to_mask(&self) -> String {
        let Some(&last) = self.ids.last() else {
            return "0".to_string();
        };
        let mut words = vec![0u32; last / 32 + 1];
        for &id in &self.ids {
            words[id / 32] |= 1 << (id % 32);
        }
        let text: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
        text.join(",")
    }
}

fn parse_id(text: &str, item: &str) -> Result<usize, CpuListError> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListError::BadItem(item.to_string()));
    }
    let id: usize = text
        .parse()
        .map_err(|_| CpuListError::BadItem(item.to_string()))?;
    if id > CPU_ID_MAX {
        return Err(CpuListError::TooLarge(id));
    }
    Ok(id)
}

/// The cpulist form, ranges collapsed: `0-7,16-23`; the empty set prints as nothing.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.ids.len() {
            let start = self.ids[i];
            let mut end = start;
            while i + 1 < self.ids.len() && self.ids[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<T: IntoIterator<Item = usize>>(iter: T) -> Self {
        Self::from_ids(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn list_ranges_and_singles_parse() {
        let set = CpuSet::parse_list("0-3,8,16-17\n").unwrap();
        assert_eq!(set.ids(), &[0, 1, 2, 3, 8, 16, 17]);
        assert_eq!(set.to_string(), "0-3,8,16-17");
    }

    #[test]
    fn empty_list_is_the_empty_set() {
        assert!(CpuSet::parse_list("\n").unwrap().is_empty());
        assert!(CpuSet::parse_list("").unwrap().is_empty());
    }

    #[test]
    fn bad_lists_are_errors_not_panics() {
        assert!(matches!(
            CpuSet::parse_list("7-0"),
            Err(CpuListError::Reversed(7, 0))
        ));
        assert!(CpuSet::parse_list("a-b").is_err());
        assert!(CpuSet::parse_list("-3").is_err());
        assert!(CpuSet::parse_list("1-").is_err());
        assert!(CpuSet::parse_list("+1").is_err());
        assert!(matches!(
            CpuSet::parse_list("0-99999999999"),
            Err(CpuListError::TooLarge(_))
        ));
    }

    #[test]
    fn mask_words_run_most_significant_first() {
        let set = CpuSet::parse_mask("00000000,00000101\n").unwrap();
        assert_eq!(set.ids(), &[0, 8]);
        let set = CpuSet::parse_mask("00000001,80000000").unwrap();
        assert_eq!(set.ids(), &[31, 32]);
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("123456789").is_err());
    }

    fn arb_set() -> impl Strategy<Value = CpuSet> {
        proptest::collection::vec(0usize..300, 0..64).prop_map(CpuSet::from_ids)
    }

    proptest! {
        #[test]
        fn list_display_then_parse_is_identity(set in arb_set()) {
            prop_assert_eq!(CpuSet::parse_list(&set.to_string()).unwrap(), set);
        }

        #[test]
        fn mask_then_parse_is_identity(set in arb_set()) {
            prop_assert_eq!(CpuSet::parse_mask(&set.to_mask()).unwrap(), set);
        }

        #[test]
        fn list_display_is_minimal_ranges(set in arb_set()) {
            // No two printed items are adjacent numbers: ranges are maximal.
            let text = set.to_string();
            let mut prev_end: Option<usize> = None;
            for item in text.split(',').filter(|s| !s.is_empty()) {
                let (lo, hi) = match item.split_once('-') {
                    Some((l, h)) => (l.parse::<usize>().unwrap(), h.parse::<usize>().unwrap()),
                    None => { let v = item.parse::<usize>().unwrap(); (v, v) }
                };
                if let Some(p) = prev_end { prop_assert!(lo > p + 1); }
                prev_end = Some(hi);
            }
        }

        #[test]
        fn arbitrary_text_never_panics(text in "[0-9,\\- a-f\n]{0,40}") {
            let _ = CpuSet::parse_list(&text);
            let _ = CpuSet::parse_mask(&text);
        }
    }
}
