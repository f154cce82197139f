//! The exporter as the local reader service's source of figures (`serve
//! --socket`): at each refresh, every counter's energy since the exporter
//! started (the same monotone, continuity-kept series `/metrics` serves) is
//! published on the service's [`Board`], which the service answers clients
//! from. The samplers never see a client: the refresh swaps one pointer.

use crate::exporter::{Exporter, Pacer};
use crate::exposition::DomainSeries;
use crate::server::Server;
use crate::slots::Plan;
use quietwatt::reader::{Board, ChannelState, ServiceInfo};
use quietwatt::Domain;
use std::time::{Duration, Instant};

/// The reader protocol's view of the exported series: energy in whole µJ
/// (rounded down, so never ahead of the exported joules), resets, ambiguous
/// decreases and whether each is still read.
pub fn channel_states(domains: &[DomainSeries]) -> Vec<ChannelState> {
    domains
        .iter()
        .filter_map(|d| {
            Some(ChannelState {
                domain: d.domain.parse::<Domain>().ok()?,
                socket: d.socket,
                die: d.die,
                energy_uj: (d.energy_j.max(0.0) * 1e6).floor() as u64,
                resets: d.resets,
                ambiguous: d.ambiguous,
                up: d.up,
            })
        })
        .collect()
}

impl Exporter {
    /// What the reader service tells its clients about the counters: the
    /// mechanism, whether it is the emulator, and how old a published reading
    /// can be (one sampling period; a drain period when the kernel samples),
    /// and how often it is published (`refresh`: the `every` of
    /// [`Exporter::run_serving`]).
    pub fn service_info(&self, refresh: Duration) -> ServiceInfo {
        let staleness = match self.plan() {
            Plan::Buffered { drain, .. } => drain.period(),
            _ => self.freq().period(),
        };
        ServiceInfo {
            mechanism: self.plan().mechanism().name().to_string(),
            emulated: self.config().emulated,
            staleness,
            refresh: refresh.min(self.config().min_interval),
        }
    }

    /// Publishes one refresh's figures on `board` (or, while no counter is
    /// read, why not).
    pub fn publish_to(&self, board: &Board, seq: u64, exposition: &crate::Exposition) {
        match &exposition.unavailable {
            Some(reason) if exposition.domains.is_empty() => board.unavailable(reason.clone()),
            _ => {
                // The set of counters is fixed once published; a set that
                // changed (none read at first, then some) starts the board.
                board.publish(
                    seq,
                    quietwatt::meter::monotonic_ns(),
                    channel_states(&exposition.domains),
                );
            }
        }
    }

    /// As [`Exporter::run`], serving the reader service's `board` too: a
    /// refresh every `every` (at most `min_interval`, at least 1 ms), each
    /// published on the board, and one every `min_interval` published to the
    /// HTTP `server` when there is one, so that `/metrics` changes no more
    /// often than without the service.
    pub fn run_serving(
        &mut self,
        server: Option<&Server>,
        board: &Board,
        every: Duration,
        wait: &mut dyn FnMut(Duration) -> bool,
    ) {
        let http = self.config().min_interval;
        let every = every.min(http).max(Duration::from_millis(1));
        let start = Instant::now();
        let (mut pace, mut pace_http) = (Pacer::new(start, every), Pacer::new(start, http));
        let mut seq = 1;
        loop {
            let now = Instant::now();
            match pace.until(now) {
                Some(d) if wait(d) => return,
                Some(_) => continue,
                None => {}
            }
            let exposition = self.refresh();
            seq += 1;
            self.publish_to(board, seq, &exposition);
            if pace_http.until(now).is_none() {
                if let Some(s) = server {
                    s.publish(exposition);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exported_joules_become_whole_microjoules_never_ahead() {
        let d = DomainSeries {
            socket: 1,
            die: None,
            domain: "dram",
            mechanism: "powercap",
            energy_j: 12.345_678_9,
            resets: 2,
            ambiguous: 1,
            up: false,
        };
        let s = channel_states(&[d]);
        assert_eq!(s.len(), 1);
        assert_eq!(
            (
                s[0].domain,
                s[0].socket,
                s[0].energy_uj,
                s[0].resets,
                s[0].ambiguous,
                s[0].up
            ),
            (Domain::Dram, 1, 12_345_678, 2, 1, false)
        );
    }
}
