//! Deterministic weighted label propagation: the clustering step of
//! [`build_communities`](super::build_communities). A pure function of its input: no
//! randomness, no database, no model.

use std::collections::{BTreeMap, VecDeque};

/// The clusters [`label_propagation`] found, and how it got there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clustering {
    /// Each cluster's node indices, ascending; clusters ordered by their smallest
    /// member. Every cluster has at least two members and is connected; isolated nodes
    /// (no link to another node) are in none.
    pub clusters: Vec<Vec<usize>>,
    /// Propagation rounds run, the last (unchanged) one included when it converged.
    pub rounds: usize,
    /// Whether a round changed no label before the round cap was reached.
    pub converged: bool,
}

/// Clusters the nodes `0..node_count` of an undirected weighted graph.
///
/// `links` are `(a, b, weight)` triples; repeated pairs (in either direction) add
/// their weights, and self-links and zero weights are ignored. In
/// [`build_communities`](super::build_communities) a node is an entity and a link's
/// weight is the number of current facts between two entities.
///
/// The algorithm, in full:
///
/// 1. **Start**: every node carries its own index as its label.
/// 2. **Rounds** (synchronous: every node reads the labels of the previous round).
///    A node that has links scores each label by the total weight of its neighbours
///    carrying it, plus a **self-vote for its own current label worth its strongest
///    link**, and takes the best-scoring label; **ties go to the smallest label**.
///    Rounds stop when one changes nothing, or after `max_rounds` rounds (the labels
///    of the last round are then used as they are). The self-vote is what stops two
///    linked nodes from swapping labels forever, the classic oscillation of
///    synchronous propagation (each sees its own label tie with the other's, and both
///    take the smaller); ties to the smallest label make every run identical.
/// 3. **Connected pieces**: the nodes sharing a label are split into the connected
///    pieces they form among themselves, so every cluster is connected.
/// 4. **No one alone**: in index order, a linked node left alone in its piece joins
///    the piece of its neighbours it is most strongly linked to (ties: the piece with
///    the smallest member). The tie rule of step 2 can strand a leaf whose index is
///    smaller than its neighbour's label; this step puts it back with its neighbour.
/// 5. **Isolated nodes** (no links) form no cluster: a one-member community says
///    nothing its entity does not already say, and would cost a summary.
///
/// # Panics
///
/// When a link names a node `>= node_count`.
///
/// ```
/// use gralkor::graph::communities::label_propagation;
///
/// // Two triangles joined by one link, and an isolated node 6.
/// let links = [(0, 1, 1), (1, 2, 1), (0, 2, 1), (3, 4, 1), (4, 5, 1), (3, 5, 1), (2, 3, 1)];
/// let found = label_propagation(7, &links, 50);
/// assert_eq!(found.clusters, vec![vec![0, 1, 2], vec![3, 4, 5]]);
/// assert!(found.converged);
/// ```
pub fn label_propagation(
    node_count: usize,
    links: &[(usize, usize, u64)],
    max_rounds: usize,
) -> Clustering {
    let mut adjacency: Vec<BTreeMap<usize, u64>> = vec![BTreeMap::new(); node_count];
    for &(a, b, w) in links {
        assert!(
            a < node_count && b < node_count,
            "link ({a}, {b}) names a node outside 0..{node_count}"
        );
        if a == b || w == 0 {
            continue;
        }
        *adjacency[a].entry(b).or_default() += w;
        *adjacency[b].entry(a).or_default() += w;
    }

    let mut labels: Vec<usize> = (0..node_count).collect();
    let mut rounds = 0;
    let mut converged = false;
    while rounds < max_rounds {
        rounds += 1;
        let next: Vec<usize> = (0..node_count)
            .map(|i| best_label(i, &adjacency[i], &labels))
            .collect();
        if next == labels {
            converged = true;
            break;
        }
        labels = next;
    }

    let (mut pieces, mut piece_of) = connected_pieces(&adjacency, &labels);
    let mut piece_min: Vec<usize> = pieces.iter().map(|p| p[0]).collect();
    for i in 0..node_count {
        let own = piece_of[i];
        if adjacency[i].is_empty() || pieces[own].len() > 1 {
            continue;
        }
        let mut weight_to: BTreeMap<usize, u64> = BTreeMap::new();
        for (&j, &w) in &adjacency[i] {
            *weight_to.entry(piece_of[j]).or_default() += w;
        }
        let target = weight_to
            .iter()
            .max_by(|(pa, wa), (pb, wb)| wa.cmp(wb).then(piece_min[**pb].cmp(&piece_min[**pa])))
            .map(|(p, _)| *p)
            .expect("a linked node has a neighbour piece");
        pieces[own].clear();
        pieces[target].push(i);
        piece_min[target] = piece_min[target].min(i);
        piece_of[i] = target;
    }

    let mut clusters: Vec<Vec<usize>> = pieces
        .into_iter()
        .filter(|p| p.len() > 1)
        .map(|mut p| {
            p.sort_unstable();
            p
        })
        .collect();
    clusters.sort_unstable_by_key(|c| c[0]);
    Clustering {
        clusters,
        rounds,
        converged,
    }
}

/// The label node `i` takes in the next round (see step 2 of [`label_propagation`]).
fn best_label(i: usize, neighbours: &BTreeMap<usize, u64>, labels: &[usize]) -> usize {
    if neighbours.is_empty() {
        return labels[i];
    }
    let mut scores: BTreeMap<usize, u64> = BTreeMap::new();
    *scores.entry(labels[i]).or_default() += neighbours.values().max().copied().unwrap_or(0);
    for (&j, &w) in neighbours {
        *scores.entry(labels[j]).or_default() += w;
    }
    // Ascending labels; only a strictly better score replaces: ties keep the smallest.
    let mut best = (labels[i], 0);
    for (&label, &score) in &scores {
        if score > best.1 {
            best = (label, score);
        }
    }
    best.0
}

/// The connected pieces of the nodes sharing each label, in order of their smallest
/// node, and the piece of every node.
fn connected_pieces(
    adjacency: &[BTreeMap<usize, u64>],
    labels: &[usize],
) -> (Vec<Vec<usize>>, Vec<usize>) {
    let n = labels.len();
    let mut piece_of = vec![usize::MAX; n];
    let mut pieces: Vec<Vec<usize>> = Vec::new();
    for start in 0..n {
        if piece_of[start] != usize::MAX {
            continue;
        }
        let id = pieces.len();
        let mut piece = Vec::new();
        let mut queue = VecDeque::from([start]);
        piece_of[start] = id;
        while let Some(i) = queue.pop_front() {
            piece.push(i);
            for &j in adjacency[i].keys() {
                if piece_of[j] == usize::MAX && labels[j] == labels[start] {
                    piece_of[j] = id;
                    queue.push_back(j);
                }
            }
        }
        pieces.push(piece);
    }
    (pieces, piece_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ones(pairs: &[(usize, usize)]) -> Vec<(usize, usize, u64)> {
        pairs.iter().map(|&(a, b)| (a, b, 1)).collect()
    }

    fn clique(nodes: &[usize]) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (k, &a) in nodes.iter().enumerate() {
            for &b in &nodes[k + 1..] {
                out.push((a, b));
            }
        }
        out
    }

    #[test]
    fn two_cliques_joined_by_a_bridge_are_two_clusters() {
        // Hand-computed: round 1 gives [0,0,0,0,3,4,4,4], round 2 [0,0,0,0,4,4,4,4],
        // round 3 changes nothing.
        let mut pairs = clique(&[0, 1, 2, 3]);
        pairs.extend(clique(&[4, 5, 6, 7]));
        pairs.push((3, 4));
        let found = label_propagation(8, &ones(&pairs), 50);
        assert_eq!(
            found.clusters,
            vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
            "{found:?}"
        );
        assert_eq!((found.rounds, found.converged), (3, true));
    }

    #[test]
    fn a_chain_collapses_into_one_cluster() {
        // [0,1,2,3] → [0,0,1,2] → [0,0,0,1] → [0,0,0,0] → unchanged.
        let found = label_propagation(4, &ones(&[(0, 1), (1, 2), (2, 3)]), 50);
        assert_eq!(found.clusters, vec![vec![0, 1, 2, 3]]);
        assert_eq!((found.rounds, found.converged), (4, true));
    }

    #[test]
    fn two_linked_nodes_do_not_oscillate() {
        let found = label_propagation(2, &ones(&[(1, 0)]), 50);
        assert_eq!(found.clusters, vec![vec![0, 1]]);
        assert_eq!((found.rounds, found.converged), (2, true));
    }

    #[test]
    fn two_nodes_linked_by_several_facts_do_not_oscillate() {
        // A self-vote of 1 would lose to the link's 3 and the two would swap forever.
        let found = label_propagation(2, &[(0, 1, 2), (1, 0, 1)], 50);
        assert_eq!(found.clusters, vec![vec![0, 1]]);
        assert_eq!((found.rounds, found.converged), (2, true));
    }

    #[test]
    fn isolated_nodes_form_no_cluster() {
        let found = label_propagation(3, &[], 50);
        assert!(found.clusters.is_empty());
        assert_eq!((found.rounds, found.converged), (1, true));
        let found = label_propagation(5, &ones(&[(1, 3)]), 50);
        assert_eq!(found.clusters, vec![vec![1, 3]]);
    }

    #[test]
    fn a_tie_goes_to_the_smallest_label() {
        // Node 6 is linked once to each triangle: round 1 gives it label 2 (a tie of
        // 6, 2 and 3), round 2 label 0 (a tie of 2, 0 and 3); then nothing changes.
        let mut pairs = clique(&[0, 1, 2]);
        pairs.extend(clique(&[3, 4, 5]));
        pairs.extend([(2, 6), (6, 3)]);
        let found = label_propagation(7, &ones(&pairs), 50);
        assert_eq!(found.clusters, vec![vec![0, 1, 2, 6], vec![3, 4, 5]]);
        assert_eq!(found.rounds, 3);
    }

    #[test]
    fn weights_decide_where_a_bridge_node_goes() {
        // As above, but two facts link 6 and 3, so both self-vote 2: round 1 gives
        // [0,0,0,3,3,3,3] (3 and 6 tie between their own labels and each other's),
        // round 2 changes nothing.
        let mut links = ones(&clique(&[0, 1, 2]));
        links.extend(ones(&clique(&[3, 4, 5])));
        links.extend([(2, 6, 1), (6, 3, 1), (3, 6, 1)]);
        let found = label_propagation(7, &links, 50);
        assert_eq!(found.clusters, vec![vec![0, 1, 2], vec![3, 4, 5, 6]]);
        assert_eq!((found.rounds, found.converged), (2, true));
    }

    #[test]
    fn a_leaf_left_alone_joins_its_neighbour() {
        // Leaf 0 hangs off node 2 of the clique 1..=4. Propagation ends at
        // [0,1,1,1,1] (the leaf's self-vote ties with its neighbour's label 1 and 0 is
        // smaller); step 4 then moves the leaf into its neighbour's cluster.
        let mut pairs = clique(&[1, 2, 3, 4]);
        pairs.push((0, 2));
        let found = label_propagation(5, &ones(&pairs), 50);
        assert_eq!(found.clusters, vec![vec![0, 1, 2, 3, 4]]);
        assert_eq!(found.rounds, 3);
    }

    #[test]
    fn the_round_cap_stops_propagation_and_self_links_and_zero_weights_are_ignored() {
        let found = label_propagation(4, &ones(&[(0, 1), (1, 2), (2, 3)]), 1);
        // After one round: [0,0,1,2]; pieces {0,1}, {2}, {3}. Step 4 puts 2 into
        // {0,1} (a tie with {3}, broken by the smallest member), then the still
        // alone 3 into {0,1,2}.
        assert_eq!(found.clusters, vec![vec![0, 1, 2, 3]]);
        assert_eq!((found.rounds, found.converged), (1, false));
        let found = label_propagation(3, &[(0, 0, 5), (1, 2, 0)], 50);
        assert!(found.clusters.is_empty());
    }

    #[test]
    fn runs_are_identical() {
        let mut pairs = clique(&[0, 1, 2, 3]);
        pairs.extend(clique(&[4, 5, 6]));
        pairs.extend([(3, 4), (7, 8), (8, 9), (9, 7)]);
        let links = ones(&pairs);
        assert_eq!(
            label_propagation(11, &links, 50),
            label_propagation(11, &links, 50)
        );
    }

    #[test]
    #[should_panic(expected = "outside 0..2")]
    fn a_link_outside_the_nodes_panics() {
        label_propagation(2, &[(0, 2, 1)], 5);
    }
}
