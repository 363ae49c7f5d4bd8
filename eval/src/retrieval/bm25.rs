//! The plain BM25 baseline the retrieval table prints beside gralkor: every session's
//! transcript (the very text gralkor ingests) a document, tokens the lower-cased runs
//! of letters and digits, no stopwords, no stemming, nothing else; `k1` 1.2, `b` 0.75
//! and the Lucene idf `ln(1 + (N − df + 0.5) / (df + 0.5))`. Sessions matching no
//! query token are not ranked; equal scores keep document order.
//!
//! ```
//! use gralkor_eval::retrieval::bm25::Bm25;
//!
//! let index = Bm25::new([("s1", "Lena named the puppy Biscuit"), ("s2", "Lena went running")]);
//! assert_eq!(index.rank("What is the puppy called?"), ["s1"]);
//! // Both name Lena once: the shorter session ranks first (length normalisation).
//! assert_eq!(index.rank("Lena"), ["s2", "s1"]);
//! ```

use std::collections::HashMap;

/// `k1`.
pub const K1: f64 = 1.2;
/// `b`.
pub const B: f64 = 0.75;

/// The lower-cased runs of letters and digits of `text`.
pub fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A BM25 index over a few documents (see the [module](self) documentation).
#[derive(Debug, Clone)]
pub struct Bm25 {
    ids: Vec<String>,
    tf: Vec<HashMap<String, u32>>,
    len: Vec<f64>,
    df: HashMap<String, u32>,
    avgdl: f64,
}

impl Bm25 {
    /// The index of `(id, text)` documents, in order.
    pub fn new<I, S, T>(docs: I) -> Bm25
    where
        I: IntoIterator<Item = (S, T)>,
        S: Into<String>,
        T: AsRef<str>,
    {
        let mut index = Bm25 {
            ids: Vec::new(),
            tf: Vec::new(),
            len: Vec::new(),
            df: HashMap::new(),
            avgdl: 0.0,
        };
        for (id, text) in docs {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let toks = tokens(text.as_ref());
            index.len.push(toks.len() as f64);
            for t in toks {
                *tf.entry(t).or_default() += 1;
            }
            for t in tf.keys() {
                *index.df.entry(t.clone()).or_default() += 1;
            }
            index.ids.push(id.into());
            index.tf.push(tf);
        }
        let n = index.len.len().max(1) as f64;
        index.avgdl = index.len.iter().sum::<f64>() / n;
        index
    }

    /// The scores of every document for `query` (0 for no match), in document order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let n = self.ids.len() as f64;
        let q = tokens(query);
        self.tf
            .iter()
            .zip(&self.len)
            .map(|(tf, &len)| {
                q.iter()
                    .filter_map(|t| {
                        let f = f64::from(*tf.get(t)?);
                        let df = f64::from(self.df[t]);
                        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                        let norm = 1.0 - B + B * len / self.avgdl.max(1e-9);
                        Some(idf * f * (K1 + 1.0) / (f + K1 * norm))
                    })
                    .sum()
            })
            .collect()
    }

    /// The ids of the documents matching `query`, best first.
    pub fn rank(&self, query: &str) -> Vec<String> {
        let scores = self.scores(query);
        let mut order: Vec<usize> = (0..self.ids.len()).filter(|&i| scores[i] > 0.0).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        order.into_iter().map(|i| self.ids[i].clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_scores_by_term_rarity_frequency_and_length() {
        assert_eq!(tokens("Lena's café, 2023!"), ["lena", "s", "café", "2023"]);
        let index = Bm25::new([
            ("a", "cat cat dog"),
            ("b", "cat bird bird bird bird bird bird"),
            ("c", "dog"),
        ]);
        // The rare term beats the common one; a repeated term beats a single one;
        // a longer document with the same count scores lower.
        assert_eq!(index.rank("bird"), ["b"]);
        assert_eq!(index.rank("cat"), ["a", "b"]);
        let s = index.scores("dog");
        assert!(s[2] > s[0] && s[0] > 0.0 && s[1] == 0.0, "{s:?}");
        // By hand: N 3, df(bird) 1, idf ln(1 + 2.5/1.5); avgdl 11/3, |b| 7, tf 6.
        let idf = (1.0f64 + 2.5 / 1.5).ln();
        let norm = 1.0 - B + B * 7.0 / (11.0 / 3.0);
        let want = idf * 6.0 * (K1 + 1.0) / (6.0 + K1 * norm);
        assert!((index.scores("bird")[1] - want).abs() < 1e-12);
        assert!(index.rank("zebra").is_empty());
    }
}
