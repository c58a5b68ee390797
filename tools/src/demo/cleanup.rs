//! Ctrl-C: whatever the demo was doing, its namespaces (and everything
//! running inside them) and temp files go.

use crate::fabric::remove_namespaces_of;
use crate::sys::SignalSet;

/// Block SIGINT/SIGTERM/SIGHUP in every thread and handle them on one
/// thread that deletes this process's namespaces (killing everything inside)
/// and temp files, then exits. Must run before any other thread starts.
pub fn cleanup_on_signal() {
    let set = match SignalSet::new(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("skeletonhunter-demo: cannot set up Ctrl-C clean-up: {e}");
            return;
        }
    };
    if let Err(e) = set.block() {
        eprintln!("skeletonhunter-demo: cannot set up Ctrl-C clean-up: {e}");
        return;
    }
    std::thread::spawn(move || {
        let sig = set.wait().unwrap_or(0);
        eprintln!("\nskeletonhunter-demo: signal {sig}: cleaning up");
        let pid = std::process::id();
        let n = remove_namespaces_of(pid);
        remove_temp_files_of(pid);
        eprintln!("skeletonhunter-demo: removed {n} namespaces");
        std::process::exit(130);
    });
}

/// Temp files and directories of this process (`skeletonhunter-*-<pid>-*`).
fn remove_temp_files_of(pid: u32) {
    let tag = format!("-{pid}-");
    if let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("skeletonhunter-") && name.contains(&tag) {
                let p = e.path();
                let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
            }
        }
    }
}
