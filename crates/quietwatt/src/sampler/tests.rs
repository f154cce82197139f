use super::*;

#[test]
fn a_merged_record_covers_both_intervals_and_counts_the_merge() {
    let f = Hertz::new(1000.0).unwrap();
    let a = Record::new(1_000, 1_000, 2, f, &[5, 7]);
    let mut b = Record::new(2_000, 1_000, 1, f, &[1, 1]);
    b.absorb(&a);
    assert_eq!(b.deltas(), &[6, 8]);
    assert_eq!((b.interval_ns, b.missed, b.merged), (2_000, 3, 1));
    let mut c = Record::new(3_000, 1_000, 0, f, &[0, 0]);
    c.absorb(&b);
    assert_eq!((c.deltas(), c.merged), (&[6u64, 8][..], 2));
}

#[test]
fn a_record_round_trips_through_its_ring_words() {
    let f = Hertz::new(177.5).unwrap();
    let mut r = Record::new(123, 45, 6, f, &[7, u64::MAX]);
    r.merged = 8;
    let words: Vec<u64> = r
        .header()
        .into_iter()
        .chain(r.deltas().iter().copied())
        .collect();
    assert_eq!(words.len(), HEADER_WORDS + 2);
    let back = Record::from_words(&words);
    assert_eq!(
        (
            back.t_ns,
            back.interval_ns,
            back.missed,
            back.merged,
            back.freq_hz
        ),
        (123, 45, 6, 8, 177.5)
    );
    assert_eq!(back.deltas(), &[7, u64::MAX]);
    // A miss count beyond 32 bits saturates rather than spilling into `merged`.
    let h = header(0, 0, u64::MAX, 3, 1.0, Marks::default());
    assert_eq!((h[2] >> 32, h[2] as u32), (u32::MAX as u64, 3));
}

#[test]
fn the_sampler_goes_where_most_counters_are_read() {
    // Not tied to a CPU (sysfs): only --cpu pins.
    assert_eq!(placement(&[], None), (None, vec![]));
    assert_eq!(placement(&[], Some(3)), (Some(3), vec![]));
    // One CPU: there, silently.
    assert_eq!(placement(&[2, 2, 2], None), (Some(2), vec![]));
    // Two sockets: where most reads are, the lowest on a tie, and a note.
    let (cpu, notes) = placement(&[0, 0, 16, 16, 16], None);
    assert_eq!(cpu, Some(16));
    assert!(notes[0].starts_with("2 of the 5 counter reads per sample are on CPU(s) 0 "));
    let (cpu, notes) = placement(&[16, 0], None);
    assert_eq!((cpu, notes.len()), (Some(0), 1));
    // --cpu elsewhere stands, and the note says where the reads are local.
    let (cpu, notes) = placement(&[1], Some(0));
    assert_eq!(cpu, Some(0));
    assert!(notes[0].contains("pin it to CPU 1"), "{notes:?}");
}

#[test]
fn freq_accepts_auto_or_hertz() {
    assert_eq!("auto".parse::<FreqArg>().unwrap(), FreqArg::Auto);
    assert_eq!(
        "1kHz".parse::<FreqArg>().unwrap(),
        FreqArg::Fixed(Hertz::new(1000.0).unwrap())
    );
    assert!("fast".parse::<FreqArg>().is_err());
    assert_eq!(Rate::auto().to_string(), "auto (5-1000)");
}
