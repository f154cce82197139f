//! Renders SVG plots to PNG beside them (`plot.svg` → `plot.png`), the way
//! `quietwatt bench overhead` and `quietwatt model` do for the plots they write: for
//! plots written before the CLI wrote PNGs, such as the studies committed under
//! `docs/overhead-runs/`.
//!
//! ```text
//! cargo run -p quietwatt-lab --example svg2png -- docs/overhead-runs/*/*.svg
//! ```
//!
//! An example rather than a `quietwatt` subcommand: converting files is not what
//! the tool is for, and the CLI already writes both formats.

use quietwatt_lab::png::PngRenderer;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: svg2png FILE.svg...");
        return ExitCode::from(2);
    }
    let renderer = PngRenderer::new();
    if let Some(warning) = renderer.font_warning() {
        eprintln!("svg2png: warning: {warning}");
    }
    let mut failed = false;
    for file in &files {
        let svg_path = Path::new(file);
        let png_path = svg_path.with_extension("png");
        let result = std::fs::read_to_string(svg_path)
            .map_err(|e| format!("cannot read {file}: {e}"))
            .and_then(|svg| {
                renderer
                    .write(&svg, &png_path)
                    .map_err(|e| format!("{file}: {e}"))
            });
        match result {
            Ok(()) => eprintln!("svg2png: {}", png_path.display()),
            Err(e) => {
                eprintln!("svg2png: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
