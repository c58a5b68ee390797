//! Strongly connected components (Tarjan), to name every module cycle.

/// The components of size two or more (and single nodes with a self-edge),
/// each as node indices in ascending order. `edges[n]` lists `n`'s successors.
pub fn cycles(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut state = Tarjan {
        edges,
        index: vec![usize::MAX; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if state.index[v] == usize::MAX {
            state.visit(v);
        }
    }
    state.out.sort();
    state.out
}

struct Tarjan<'a> {
    edges: &'a [Vec<usize>],
    index: Vec<usize>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    out: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    /// Iterative, so a deep module tree cannot overflow the stack.
    fn visit(&mut self, root: usize) {
        let mut work: Vec<(usize, usize)> = vec![(root, 0)];
        self.open(root);
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(&w) = self.edges[v].get(*i) {
                *i += 1;
                if self.index[w] == usize::MAX {
                    self.open(w);
                    work.push((w, 0));
                } else if self.on_stack[w] {
                    self.low[v] = self.low[v].min(self.index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                self.low[parent] = self.low[parent].min(self.low[v]);
            }
            if self.low[v] == self.index[v] {
                self.close(v);
            }
        }
    }

    fn open(&mut self, v: usize) {
        self.index[v] = self.next;
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
    }

    fn close(&mut self, v: usize) {
        let mut component = Vec::new();
        while let Some(w) = self.stack.pop() {
            self.on_stack[w] = false;
            component.push(w);
            if w == v {
                break;
            }
        }
        if component.len() > 1 || self.edges[v].contains(&v) {
            component.sort_unstable();
            self.out.push(component);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cycles;

    #[test]
    fn finds_each_circle_and_nothing_else() {
        // 0 -> 1 -> 2 -> 0, 3 -> 4, 4 -> 4, 5 alone.
        let edges = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![4], vec![]];
        assert_eq!(cycles(&edges), vec![vec![0, 1, 2], vec![4]]);
        assert!(cycles(&[vec![1], vec![2], vec![]]).is_empty());
    }
}
