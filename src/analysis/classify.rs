//! Fault classes and access types: a pure function of what the kernel told us
//! (major or minor, the x86 error code) and the target mapping.
//!
//! - **major**: the kernel counted it as major (it waited for I/O).
//! - **cow**: a minor write fault that the kernel resolves by copying a page:
//!   a write to a present page of a private writable mapping (after `fork`,
//!   or after a read mapped the shared zero page), or a write to a not-present
//!   page of a private file-backed mapping.
//! - **minor**: every other minor fault.

use serde::Serialize;

/// x86 page-fault error code bits.
pub const PF_PRESENT: u64 = 1 << 0;
/// Write access.
pub const PF_WRITE: u64 = 1 << 1;
/// Instruction fetch.
pub const PF_INSTR: u64 = 1 << 4;

/// Fault class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultClass {
    /// Resolved without I/O and without a copy.
    Minor,
    /// Waited for I/O.
    Major,
    /// Copy-on-write.
    Cow,
}

impl FaultClass {
    /// All classes, in report order.
    pub const ALL: [FaultClass; 3] = [FaultClass::Minor, FaultClass::Major, FaultClass::Cow];
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            FaultClass::Minor => "minor",
            FaultClass::Major => "major",
            FaultClass::Cow => "cow",
        }
    }
}

/// Faults by class, indexed by [`FaultClass`] (report.json lists them
/// minor, major, cow).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct ClassCounts {
    /// Minor faults.
    pub minor: u64,
    /// Major faults.
    pub major: u64,
    /// COW faults.
    pub cow: u64,
}

impl ClassCounts {
    /// The faults of `class`.
    pub fn of(&self, class: FaultClass) -> u64 {
        match class {
            FaultClass::Minor => self.minor,
            FaultClass::Major => self.major,
            FaultClass::Cow => self.cow,
        }
    }

    /// Adds `n` faults of `class`.
    pub fn add(&mut self, class: FaultClass, n: u64) {
        match class {
            FaultClass::Minor => self.minor += n,
            FaultClass::Major => self.major += n,
            FaultClass::Cow => self.cow += n,
        }
    }

    /// All classes.
    pub fn total(&self) -> u64 {
        self.minor + self.major + self.cow
    }
}

impl std::ops::AddAssign for ClassCounts {
    fn add_assign(&mut self, other: ClassCounts) {
        for class in FaultClass::ALL {
            self.add(class, other.of(class));
        }
    }
}

impl std::iter::Sum for ClassCounts {
    fn sum<I: Iterator<Item = ClassCounts>>(iter: I) -> ClassCounts {
        iter.fold(ClassCounts::default(), |mut sum, c| {
            sum += c;
            sum
        })
    }
}

/// Access type, from the error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Data read.
    Read,
    /// Data write.
    Write,
    /// Instruction fetch.
    Exec,
    /// No error code (tracepoints unavailable or not paired).
    Unknown,
}

impl Access {
    /// All access types, in report order.
    pub const ALL: [Access; 4] = [Access::Read, Access::Write, Access::Exec, Access::Unknown];
    /// From an x86 error code.
    pub fn from_error_code(error_code: u64) -> Access {
        if error_code & PF_INSTR != 0 {
            Access::Exec
        } else if error_code & PF_WRITE != 0 {
            Access::Write
        } else {
            Access::Read
        }
    }
    /// Lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Exec => "exec",
            Access::Unknown => "unknown",
        }
    }
}

/// What classification needs to know about the target mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetMapping {
    /// Backed by a file's page cache.
    pub file_backed: bool,
    /// MAP_PRIVATE.
    pub private: bool,
    /// PROT_WRITE.
    pub writable: bool,
}

/// Classifies one fault.
pub fn classify(
    major: bool,
    error_code: Option<u64>,
    target: Option<TargetMapping>,
) -> (FaultClass, Access) {
    let access = error_code.map_or(Access::Unknown, Access::from_error_code);
    if major {
        return (FaultClass::Major, access);
    }
    let (Some(error_code), Some(target)) = (error_code, target) else {
        return (FaultClass::Minor, access);
    };
    let write = access == Access::Write;
    let present = error_code & PF_PRESENT != 0;
    let cow = write && target.private && target.writable && (present || target.file_backed);
    (
        if cow {
            FaultClass::Cow
        } else {
            FaultClass::Minor
        },
        access,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each class has its own slot; sums add slot by slot.
    #[test]
    fn class_counts() {
        let mut c = ClassCounts::default();
        for (class, n) in FaultClass::ALL.into_iter().zip([1, 20, 300]) {
            c.add(class, n);
        }
        assert_eq!((c.minor, c.major, c.cow), (1, 20, 300));
        assert_eq!(FaultClass::ALL.map(|class| c.of(class)), [1, 20, 300]);
        assert_eq!(c.total(), 321);
        let sum: ClassCounts = [c, c].into_iter().sum();
        assert_eq!((sum.minor, sum.major, sum.cow), (2, 40, 600));
    }

    const ANON: TargetMapping = TargetMapping {
        file_backed: false,
        private: true,
        writable: true,
    };
    const DATA: TargetMapping = TargetMapping {
        file_backed: true,
        private: true,
        writable: true,
    };
    const TEXT: TargetMapping = TargetMapping {
        file_backed: true,
        private: true,
        writable: false,
    };
    const SHARED_FILE: TargetMapping = TargetMapping {
        file_backed: true,
        private: false,
        writable: true,
    };
    const SHARED_ANON: TargetMapping = TargetMapping {
        file_backed: false,
        private: false,
        writable: true,
    };

    /// Error codes × mapping kinds.
    #[test]
    fn table() {
        use Access::*;
        use FaultClass::*;
        let cases = [
            // (major, error code, target, class, access, why)
            (
                false,
                Some(0b10),
                Some(ANON),
                Minor,
                Write,
                "first touch of anonymous memory",
            ),
            (
                false,
                Some(0b00),
                Some(ANON),
                Minor,
                Read,
                "read maps the zero page",
            ),
            (
                false,
                Some(0b11),
                Some(ANON),
                Cow,
                Write,
                "write to zero page / after fork",
            ),
            (
                false,
                Some(0b10),
                Some(DATA),
                Cow,
                Write,
                ".data first write copies the file page",
            ),
            (
                false,
                Some(0b11),
                Some(DATA),
                Cow,
                Write,
                ".data written after a read",
            ),
            (false, Some(0b00), Some(DATA), Minor, Read, "page cache hit"),
            (
                false,
                Some(0b10000),
                Some(TEXT),
                Minor,
                Exec,
                "code page cache hit",
            ),
            (
                false,
                Some(0b10001),
                Some(TEXT),
                Minor,
                Exec,
                "present exec (spurious)",
            ),
            (
                false,
                Some(0b10),
                Some(SHARED_FILE),
                Minor,
                Write,
                "shared file write: no copy",
            ),
            (
                false,
                Some(0b11),
                Some(SHARED_FILE),
                Minor,
                Write,
                "shared write-notify",
            ),
            (
                false,
                Some(0b11),
                Some(SHARED_ANON),
                Minor,
                Write,
                "shared anon: no copy",
            ),
            (true, Some(0b00), Some(TEXT), Major, Read, "read from disk"),
            (
                true,
                Some(0b10),
                Some(DATA),
                Major,
                Write,
                "major wins over cow",
            ),
            (
                true,
                Some(0b10000),
                Some(TEXT),
                Major,
                Exec,
                "code from disk",
            ),
            (
                false,
                None,
                Some(DATA),
                Minor,
                Unknown,
                "no tracepoint: cannot tell cow",
            ),
            (false, Some(0b10), None, Minor, Write, "unknown mapping"),
            (true, None, None, Major, Unknown, "major without error code"),
        ];
        for (major, ec, target, class, access, why) in cases {
            assert_eq!(classify(major, ec, target), (class, access), "{why}");
        }
    }
}
