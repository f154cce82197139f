use super::*;

fn problem(text: &str) -> DurationProblem {
    parse_duration(text).unwrap_err().problem
}

#[test]
fn every_unit_and_a_bare_number_of_seconds() {
    for (text, d) in [
        ("1.5s", Duration::from_millis(1500)),
        ("500ms", Duration::from_millis(500)),
        ("2m", Duration::from_secs(120)),
        ("1h", Duration::from_secs(3600)),
        ("250us", Duration::from_micros(250)),
        ("250µs", Duration::from_micros(250)),
        ("7ns", Duration::from_nanos(7)),
        ("10", Duration::from_secs(10)),
        ("2.5", Duration::from_millis(2500)),
        ("0.001", Duration::from_millis(1)),
        (".5s", Duration::from_millis(500)),
        ("5.", Duration::from_secs(5)),
        (" 3 ms ", Duration::from_millis(3)),
        ("+2s", Duration::from_secs(2)),
        ("0", Duration::ZERO),
        ("0.5m", Duration::from_secs(30)),
        ("1.5ms", Duration::from_micros(1500)),
    ] {
        assert_eq!(parse_duration(text), Ok(d), "{text}");
    }
}

#[test]
fn what_the_clis_float_parser_took_is_still_taken() {
    // Before, the CLI parsed seconds with f64: exponents and long fractions worked.
    assert_eq!(parse_duration("1e-3"), Ok(Duration::from_millis(1)));
    assert_eq!(parse_duration("1E2s"), Ok(Duration::from_secs(100)));
    assert_eq!(parse_duration("2.5e+1"), Ok(Duration::from_secs(25)));
    assert_eq!(parse_duration("0.1"), Ok(Duration::from_millis(100)));
    assert_eq!(
        parse_duration("1.500000000000"),
        Ok(Duration::from_millis(1500))
    );
}

#[test]
fn empty_negative_and_not_numbers_say_which() {
    assert_eq!(problem(""), DurationProblem::Empty);
    assert_eq!(problem("   "), DurationProblem::Empty);
    assert_eq!(problem("-1s"), DurationProblem::Negative);
    assert_eq!(problem("-0.5"), DurationProblem::Negative);
    assert_eq!(problem("NaN"), DurationProblem::NotANumber);
    assert_eq!(problem("nan"), DurationProblem::NotANumber);
    assert_eq!(problem("inf"), DurationProblem::NotANumber);
    assert_eq!(problem("s"), DurationProblem::NotANumber);
    assert_eq!(problem("."), DurationProblem::NotANumber);
    assert_eq!(
        problem("1.2.3s"),
        DurationProblem::UnknownUnit(".3s".into())
    );
    assert_eq!(problem("5d"), DurationProblem::UnknownUnit("d".into()));
    assert_eq!(problem("5 sec"), DurationProblem::UnknownUnit("sec".into()));
}

#[test]
fn overflow_and_precision_are_errors_not_wrong_values() {
    assert_eq!(
        problem("99999999999999999999999s"),
        DurationProblem::TooLong
    );
    assert_eq!(problem("99999999999999999999h"), DurationProblem::TooLong);
    assert_eq!(problem("1e400"), DurationProblem::TooLong);
    assert_eq!(
        problem("123456789012345678901234567890123456789012345"),
        DurationProblem::TooLong
    );
    assert_eq!(problem("1.5ns"), DurationProblem::FinerThanNanosecond);
    assert_eq!(
        problem("0.0000000001"),
        DurationProblem::FinerThanNanosecond
    );
    assert_eq!(problem("1e-400"), DurationProblem::FinerThanNanosecond);
    // Zeros below a nanosecond change nothing.
    assert_eq!(parse_duration("1.0000000000s"), Ok(Duration::from_secs(1)));
    assert_eq!(parse_duration("0e-400"), Ok(Duration::ZERO));
    // The largest Duration still parses.
    let max = format!("{}.999999999", u64::MAX);
    assert_eq!(parse_duration(&max), Ok(Duration::MAX));
    assert_eq!(
        problem(&format!("{}s", u128::from(u64::MAX) + 1)),
        DurationProblem::TooLong
    );
}

#[test]
fn positive_refuses_zero() {
    assert_eq!(
        parse_positive_duration("0ms").unwrap_err().problem,
        DurationProblem::Zero
    );
    assert_eq!(parse_positive_duration("1ns"), Ok(Duration::from_nanos(1)));
}

#[test]
fn errors_name_the_text_and_the_grammar() {
    let e = parse_duration("10 parsecs").unwrap_err().to_string();
    assert!(
        e.contains("'10 parsecs'") && e.contains("unknown unit 'parsecs'"),
        "{e}"
    );
    assert!(e.contains("500ms"), "{e}");
    let e = parse_duration("-3").unwrap_err().to_string();
    assert!(e.contains("negative"), "{e}");
}

#[test]
fn formats_in_the_largest_exact_unit_and_reads_back() {
    for (d, s) in [
        (Duration::from_millis(1), "1ms"),
        (Duration::from_millis(1500), "1500ms"),
        (Duration::from_secs(2), "2s"),
        (Duration::from_micros(3), "3us"),
        (Duration::from_nanos(1001), "1001ns"),
        (Duration::ZERO, "0s"),
    ] {
        assert_eq!(format_duration(d), s);
        assert_eq!(parse_duration(s), Ok(d));
    }
}
