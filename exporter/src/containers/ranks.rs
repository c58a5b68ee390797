//! A container's ranks from its processes' environment, as the launchers
//! set them for each worker process (one per GPU): torchrun and DeepSpeed
//! (`RANK`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`, `WORLD_SIZE`), Open MPI
//! (`OMPI_COMM_WORLD_*`) and Slurm (`SLURM_PROCID`, `SLURM_LOCALID`,
//! `SLURM_NTASKS`). A process with a rank but no local rank is not a
//! worker: under Kubeflow's PyTorchJob the pod's own `RANK` is the pod's
//! index, which only the workers' variables turn into global ranks.

use skeletonhunter_common::ranks::Ranks;

/// One launcher's variables: global rank, local rank, local ranks (may be
/// absent), world size (may be absent).
struct Launcher {
    rank: &'static str,
    local_rank: &'static str,
    local_size: &'static str,
    world: &'static str,
}

const LAUNCHERS: [Launcher; 3] = [
    Launcher {
        rank: "RANK",
        local_rank: "LOCAL_RANK",
        local_size: "LOCAL_WORLD_SIZE",
        world: "WORLD_SIZE",
    },
    Launcher {
        rank: "OMPI_COMM_WORLD_RANK",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        local_size: "OMPI_COMM_WORLD_LOCAL_SIZE",
        world: "OMPI_COMM_WORLD_SIZE",
    },
    Launcher {
        rank: "SLURM_PROCID",
        local_rank: "SLURM_LOCALID",
        local_size: "SLURM_NTASKS_PER_NODE",
        world: "SLURM_NTASKS",
    },
];

/// What one worker process says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    /// Its global rank minus its local rank: the container's first rank.
    pub first: u32,
    /// Its global rank.
    pub rank: u32,
    /// The ranks of its container, if the launcher says.
    pub local_size: Option<u32>,
    /// The job's ranks, if the launcher says.
    pub world: Option<u32>,
}

/// The worker `environ` (a `/proc/<pid>/environ` block) describes, by
/// the first launcher whose rank and local rank are both set and sane.
pub fn worker(environ: &[u8]) -> Option<Worker> {
    let var = |name: &str| -> Option<u32> {
        environ
            .split(|b| *b == 0)
            .filter_map(|e| std::str::from_utf8(e).ok()?.split_once('='))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.trim().parse().ok())
    };
    LAUNCHERS.iter().find_map(|l| {
        let (rank, local) = (var(l.rank)?, var(l.local_rank)?);
        Some(Worker {
            first: rank.checked_sub(local)?,
            rank,
            local_size: var(l.local_size).filter(|&n| n > local),
            world: var(l.world).filter(|&w| w > rank),
        })
    })
}

/// The container's ranks from its workers: the first rank of the first
/// worker, as many ranks as the launcher says the container holds (else
/// the workers seen that agree with it), the job's size where said.
/// `None` without a worker or where the numbers do not add up.
pub fn of_workers(workers: &[Worker]) -> Option<Ranks> {
    let first = workers.first()?.first;
    let mine: Vec<&Worker> = workers.iter().filter(|w| w.first == first).collect();
    let seen = mine.iter().map(|w| w.rank - first + 1).max().unwrap_or(1);
    let count = mine.iter().find_map(|w| w.local_size).unwrap_or(seen);
    let world = mine.iter().find_map(|w| w.world);
    Ranks::new(first, count, world)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<u8> {
        let mut out = b"PATH=/bin\0\xff\xfe=x\0".to_vec();
        for (k, v) in vars {
            out.extend_from_slice(format!("{k}={v}\0").as_bytes());
        }
        out
    }

    #[test]
    fn a_torchrun_worker_names_its_container_s_first_rank_and_the_job_size() {
        let w = worker(&env(&[
            ("RANK", "13"),
            ("LOCAL_RANK", "5"),
            ("LOCAL_WORLD_SIZE", "8"),
            ("WORLD_SIZE", "64"),
        ]))
        .unwrap();
        assert_eq!(
            w,
            Worker {
                first: 8,
                rank: 13,
                local_size: Some(8),
                world: Some(64)
            }
        );
        assert_eq!(of_workers(&[w]), Ranks::new(8, 8, Some(64)));
    }

    #[test]
    fn a_pod_s_own_rank_without_a_local_rank_is_not_a_worker() {
        // Kubeflow's PyTorchJob: the pod's index, before torchrun.
        assert_eq!(worker(&env(&[("RANK", "3"), ("WORLD_SIZE", "4")])), None);
        assert_eq!(
            worker(&env(&[("RANK", "1"), ("LOCAL_RANK", "2")])),
            None,
            "local above global"
        );
        assert_eq!(worker(&env(&[("RANK", "x"), ("LOCAL_RANK", "0")])), None);
        assert_eq!(of_workers(&[]), None);
    }

    #[test]
    fn open_mpi_and_slurm_workers_count_too() {
        let mpi = worker(&env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
        ]))
        .unwrap();
        let slurm = worker(&env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NTASKS", "4"),
        ]))
        .unwrap();
        // No local size: the workers seen say how many ranks the container holds.
        assert_eq!(of_workers(&[mpi, slurm]), Ranks::new(2, 2, Some(4)));
    }

    #[test]
    fn numbers_that_do_not_add_up_give_no_ranks() {
        let w = Worker {
            first: 8,
            rank: 8,
            local_size: Some(8),
            world: Some(12),
        };
        assert_eq!(of_workers(&[w]), None, "ranks 8-15 of a 12-rank job");
        // A stray worker of another container does not widen this one.
        let other = Worker {
            first: 16,
            rank: 20,
            local_size: None,
            world: None,
        };
        let w = Worker {
            first: 8,
            rank: 9,
            local_size: None,
            world: None,
        };
        assert_eq!(of_workers(&[w, other]), Ranks::new(8, 2, None));
    }
}
