//! Claim owners that carry their process: an engine's owner id names the process that
//! holds its claims, so a claim whose holder is provably gone is taken over at once
//! instead of after its lease.
//!
//! An owner id is `<uuid>#<boot id>.<pid namespace>.<pid>.<start time>`: the kernel's
//! boot id (`/proc/sys/kernel/random/boot_id`, new at every boot and different on
//! every machine), the inode of the process's pid namespace (containers on one machine
//! share the boot id but not the namespace), its pid and its start time (clock ticks
//! after boot, field 22 of `/proc/<pid>/stat`, which tells a reused pid apart).
//!
//! A holder is **gone** only when its boot id and pid namespace are this process's
//! and no process with its pid and start time exists (or it is a zombie, killed and
//! not yet reaped). Anywhere else — another machine, another container, an owner id
//! without the suffix (older versions, or a platform without `/proc`) — its liveness
//! is unknown and the lease stays the rule. Taking over a claim whose holder was alive
//! after all would still be safe: the claim's generation fence refuses the older
//! holder's commit; it would only waste that holder's model calls.

use std::sync::OnceLock;

use uuid::Uuid;

/// This process as an owner id suffix, when `/proc` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Process {
    boot: String,
    namespace: String,
    pid: u32,
    start: u64,
}

impl Process {
    fn suffix(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.boot, self.namespace, self.pid, self.start
        )
    }

    fn parse(suffix: &str) -> Option<Process> {
        let mut parts = suffix.rsplitn(4, '.');
        let start = parts.next()?.parse().ok()?;
        let pid = parts.next()?.parse().ok()?;
        let namespace = parts.next()?.to_owned();
        let boot = parts.next()?.to_owned();
        Some(Process {
            boot,
            namespace,
            pid,
            start,
        })
    }
}

/// The boot id, pid namespace and start time of this process, read once.
fn this_process() -> Option<&'static Process> {
    static THIS: OnceLock<Option<Process>> = OnceLock::new();
    THIS.get_or_init(|| {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let boot = boot.trim();
        let namespace = namespace_of("self")?;
        let pid = std::process::id();
        let (_, start) = stat_of(pid)?;
        (!boot.is_empty() && boot.chars().all(|c| c.is_ascii_hexdigit() || c == '-')).then(
            || Process {
                boot: boot.to_owned(),
                namespace,
                pid,
                start,
            },
        )
    })
    .as_ref()
}

/// `4026531836` from `/proc/<who>/ns/pid` (`pid:[4026531836]`).
fn namespace_of(who: &str) -> Option<String> {
    let link = std::fs::read_link(format!("/proc/{who}/ns/pid")).ok()?;
    let link = link.to_str()?;
    let inode = link.strip_prefix("pid:[")?.strip_suffix(']')?;
    inode
        .chars()
        .all(|c| c.is_ascii_digit())
        .then(|| inode.to_owned())
}

/// The state letter and start time of process `pid`, from `/proc/<pid>/stat`; `None`
/// when no such process exists. The command name (field 2) may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn stat_of(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 is the state, field 22 the start time.
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// A new owner id for an engine: a fresh uuid, and this process when `/proc` tells it.
pub(crate) fn new_owner_id() -> String {
    let id = Uuid::new_v4();
    match this_process() {
        Some(p) => format!("{id}#{}", p.suffix()),
        None => id.to_string(),
    }
}

/// Whether the process that made owner id `owner` is provably gone (see the module
/// docs); `false` when that is unknown.
pub(crate) fn owner_gone(owner: &str) -> bool {
    let Some(me) = this_process() else {
        return false;
    };
    let Some(holder) = owner.split_once('#').and_then(|(_, s)| Process::parse(s)) else {
        return false;
    };
    if holder.boot != me.boot || holder.namespace != me.namespace {
        return false;
    }
    match stat_of(holder.pid) {
        None => true,
        Some((state, start)) => start != holder.start || state == 'Z' || state == 'X',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_id_names_this_process() {
        let id = new_owner_id();
        let me = this_process().expect("/proc on Linux");
        let (_, suffix) = id.split_once('#').unwrap();
        assert_eq!(Process::parse(suffix).as_ref(), Some(me));
        assert!(!owner_gone(&id), "this process is alive");
    }

    #[test]
    fn a_reused_pid_or_a_missing_process_is_gone_and_elsewhere_is_unknown() {
        let me = this_process().unwrap().clone();
        let reused = Process {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(owner_gone(&format!("x#{}", reused.suffix())));
        // pid_max is at most 2^22: this pid never exists.
        let missing = Process {
            pid: 4_194_304 + 7,
            ..me.clone()
        };
        assert!(owner_gone(&format!("x#{}", missing.suffix())));
        let other_boot = Process {
            boot: "00000000-0000-0000-0000-000000000000".into(),
            ..missing.clone()
        };
        assert!(!owner_gone(&format!("x#{}", other_boot.suffix())));
        let other_namespace = Process {
            namespace: "1".into(),
            ..missing
        };
        assert!(!owner_gone(&format!("x#{}", other_namespace.suffix())));
        assert!(!owner_gone(&Uuid::new_v4().to_string()), "no suffix");
        assert!(!owner_gone("x#garbage"));
    }
}
