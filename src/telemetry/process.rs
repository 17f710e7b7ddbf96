//! The standard `process_*` metrics (as Prometheus's own clients name them), read from `/proc/self` on each
//! scrape: CPU time, memory, open files and their limit, the start time. Elsewhere than Linux there are none.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/<pid>/stat`'s times: `USER_HZ`, 100 on every Linux architecture's ABI (as
/// Prometheus's procfs assumes too).
const USER_HZ: f64 = 100.0;

#[derive(Debug)]
pub(super) struct ProcessCollector;

/// One reading of the process.
#[derive(Debug, Clone, PartialEq)]
struct ProcessSample {
    cpu_seconds: f64,
    start_time_seconds: f64,
    resident_memory_bytes: i64,
    virtual_memory_bytes: i64,
    open_fds: i64,
    max_fds: i64,
}

impl ProcessSample {
    fn read() -> Option<Self> {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
        sample(
            &read("/proc/self/stat")?,
            &read("/proc/self/status")?,
            &read("/proc/self/limits")?,
            &read("/proc/stat")?,
            i64::try_from(open_fds).ok()?,
        )
    }
}

/// A sample from the texts of `/proc/self/stat`, `/proc/self/status`, `/proc/self/limits` and `/proc/stat`.
fn sample(stat: &str, status: &str, limits: &str, system_stat: &str, open_fds: i64) -> Option<ProcessSample> {
    // The fields after the command, which is in parentheses and may hold spaces: state is field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |number: usize| fields.get(number - 3)?.parse::<f64>().ok();
    let boot_time: f64 = system_stat.lines().find_map(|line| line.strip_prefix("btime "))?.trim().parse().ok()?;
    let kibibytes = |name: &str| -> Option<i64> {
        let line = status.lines().find_map(|line| line.strip_prefix(name))?;
        Some(line.trim().strip_suffix("kB")?.trim().parse::<i64>().ok()? * 1024)
    };
    let max_fds = limits.lines().find_map(|line| line.strip_prefix("Max open files"))?.split_whitespace().next()?;
    Some(ProcessSample {
        cpu_seconds: (field(14)? + field(15)?) / USER_HZ,
        start_time_seconds: boot_time + field(22)? / USER_HZ,
        resident_memory_bytes: kibibytes("VmRSS:")?,
        virtual_memory_bytes: kibibytes("VmSize:")?,
        open_fds,
        // "unlimited" is no number: the most an i64 holds.
        max_fds: max_fds.parse().unwrap_or(i64::MAX),
    })
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Some(sample) = ProcessSample::read() else { return Ok(()) };
        let cpu = ConstCounter::new(sample.cpu_seconds);
        let help = "Total user and system CPU time spent in seconds";
        cpu.encode(encoder.encode_descriptor("process_cpu_seconds", help, None, cpu.metric_type())?)?;
        let help = "Start time of the process since the Unix epoch in seconds";
        gauge(&mut encoder, "process_start_time_seconds", help, sample.start_time_seconds)?;
        let help = "Resident memory size in bytes";
        gauge(&mut encoder, "process_resident_memory_bytes", help, sample.resident_memory_bytes)?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            sample.virtual_memory_bytes,
        )?;
        gauge(&mut encoder, "process_open_fds", "Number of open file descriptors", sample.open_fds)?;
        gauge(&mut encoder, "process_max_fds", "Maximum number of open file descriptors", sample.max_fds)
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: impl EncodeGaugeValue,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from a provisioner process (trimmed to the lines read).
    const STAT: &str = "4242 (provisioner web) S 1 4242 4242 0 -1 4194560 5321 0 0 0 250 75 0 0 20 0 9 0 123456 \
                        1073741824 12000 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 1 0 0 0 0 0";
    const STATUS: &str = "Name:\tprovisioner\nVmPeak:\t 1100000 kB\nVmSize:\t 1048576 kB\nVmRSS:\t   49152 kB\n";
    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
                          Max open files            1048576              1048576              files     \n";
    const SYSTEM_STAT: &str = "cpu  1 2 3 4\nbtime 1764900000\nprocesses 999\n";

    #[test]
    fn a_sample_is_read_from_procs_texts() {
        let sample = sample(STAT, STATUS, LIMITS, SYSTEM_STAT, 17).unwrap();
        assert_eq!(
            sample,
            ProcessSample {
                cpu_seconds: 3.25,
                start_time_seconds: 1_764_900_000.0 + 1234.56,
                resident_memory_bytes: 49152 * 1024,
                virtual_memory_bytes: 1_048_576 * 1024,
                open_fds: 17,
                max_fds: 1_048_576,
            }
        );
        let unlimited = LIMITS.replace("1048576              1048576", "unlimited            unlimited");
        assert_eq!(sample_with_limits(&unlimited).max_fds, i64::MAX);
        assert_eq!(super::sample("4242 (x) S", STATUS, LIMITS, SYSTEM_STAT, 1), None, "a stat cut short");
    }

    fn sample_with_limits(limits: &str) -> ProcessSample {
        sample(STAT, STATUS, limits, SYSTEM_STAT, 1).unwrap()
    }

    #[test]
    fn this_process_reads_as_a_running_one() {
        let sample = ProcessSample::read().expect("the tests run on Linux");
        assert!(sample.resident_memory_bytes > 0 && sample.open_fds > 0 && sample.max_fds >= sample.open_fds);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(sample.start_time_seconds <= now + 1.0 && sample.start_time_seconds > now - 86_400.0, "{sample:?}");
    }
}
