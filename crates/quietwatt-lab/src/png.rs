//! The plots as PNG: an SVG document from [`plot`](quietwatt_stats::plot) (or any other)
//! rasterized with resvg, at twice its size.
//!
//! The SVG stays the plot of record (it is what the tests read series from); the
//! PNG is for the places that show no SVG (some Markdown viewers, chat, slides).
//! Text needs a font: the system's fonts are loaded once per [`PngRenderer`], and
//! the generic `sans-serif` the plots ask for is mapped to one that is installed,
//! since fontdb's own default (Arial) is rarely there on Linux. Without any font
//! the PNG is still written, with its shapes and without its labels, and
//! [`PngRenderer::font_warning`] says so and how to fix it.

use resvg::tiny_skia;
use resvg::usvg;
use resvg::usvg::fontdb;
use std::path::{Path, PathBuf};

/// How much larger than the SVG's own size the PNG is drawn: at 1x the 10- and
/// 11-pixel labels come out blurred, at 2x they stay readable on a high-density
/// screen and when zoomed.
pub const SCALE: f32 = 2.0;

/// The largest PNG drawn, in pixels (about 256 MiB of RGBA), so that an SVG with an
/// absurd size fails with an error rather than exhausting memory.
const MAX_PIXELS: u64 = 64 << 20;

/// Families tried, in order, for the generic `sans-serif`: what Debian's
/// `fonts-dejavu-core` installs first, then the usual ones of other systems.
const SANS_SERIF: [&str; 6] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Arial",
    "Helvetica",
];

/// Why an SVG could not become a PNG.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PngError {
    /// The document is not SVG that resvg can read.
    #[error("the plot is not a valid SVG document: {0}")]
    Svg(#[from] usvg::Error),
    /// The document's size at [`SCALE`] is empty or too large to draw.
    #[error("the plot's size {width}x{height} px (at {SCALE}x) cannot be drawn: it must be at least 1x1 and at most {MAX_PIXELS} pixels")]
    Size {
        /// Width in pixels, after scaling.
        width: u64,
        /// Height in pixels, after scaling.
        height: u64,
    },
    /// The PNG encoder failed (it writes to memory, so this is a bug, not a user error).
    #[error("cannot encode the PNG: {0}")]
    Encode(#[from] ::png::EncodingError),
    /// The PNG could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: std::io::Error,
    },
}

/// Turns SVG documents into PNG images; holds the fonts, which are loaded once
/// since scanning the system's font directories costs more than drawing a plot.
#[derive(Debug)]
pub struct PngRenderer {
    options: usvg::Options<'static>,
    sans_serif: Option<String>,
}

impl PngRenderer {
    /// A renderer with the system's fonts (fontconfig's directories, or the usual
    /// ones when fontconfig has no configuration).
    pub fn new() -> Self {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        Self::with_fonts(db)
    }

    /// A renderer with the fonts of `db` only (an empty one draws no text): for
    /// tests, and for a caller that ships its own fonts.
    pub fn with_fonts(mut db: fontdb::Database) -> Self {
        let sans_serif = pick_sans_serif(&db);
        if let Some(family) = &sans_serif {
            db.set_sans_serif_family(family.clone());
        }
        let mut options = usvg::Options::default();
        // Text without a font-family: the same face, not fontdb's Times New Roman.
        if let Some(family) = &sans_serif {
            options.font_family = family.clone();
        }
        options.fontdb = std::sync::Arc::new(db);
        Self {
            options,
            sans_serif,
        }
    }

    /// The installed family drawn for `sans-serif`, or `None` when no font was
    /// found at all.
    pub fn sans_serif(&self) -> Option<&str> {
        self.sans_serif.as_deref()
    }

    /// A sentence for the user when the PNGs will have no text, with the fix;
    /// `None` when a font was found.
    pub fn font_warning(&self) -> Option<&'static str> {
        self.sans_serif.is_none().then_some(
            "no font found, so the PNG plots have no text (titles, axes, labels; the SVG plots are complete): install one, e.g. `apt-get install fonts-dejavu-core`",
        )
    }

    /// `svg` as PNG bytes, [`SCALE`] times its width and height, on white (the
    /// plots paint their own white background; this covers documents that do not,
    /// so that no viewer shows them on a dark transparent backdrop).
    pub fn render(&self, svg: &str) -> Result<Vec<u8>, PngError> {
        let tree = usvg::Tree::from_str(svg, &self.options)?;
        let size = tree.size();
        let (width, height) = (
            (f64::from(size.width()) * f64::from(SCALE)).ceil(),
            (f64::from(size.height()) * f64::from(SCALE)).ceil(),
        );
        // usvg guarantees a finite, positive size; clamp before casting anyway.
        let (width, height) = (
            width.clamp(0.0, 1e12) as u64,
            height.clamp(0.0, 1e12) as u64,
        );
        let too_large = width.saturating_mul(height) > MAX_PIXELS;
        let pixmap = (!too_large)
            .then(|| {
                tiny_skia::Pixmap::new(u32::try_from(width).ok()?, u32::try_from(height).ok()?)
            })
            .flatten();
        let Some(mut pixmap) = pixmap else {
            return Err(PngError::Size { width, height });
        };
        pixmap.fill(tiny_skia::Color::WHITE);
        resvg::render(
            &tree,
            tiny_skia::Transform::from_scale(SCALE, SCALE),
            &mut pixmap.as_mut(),
        );
        Ok(pixmap.encode_png()?)
    }

    /// Renders `svg` and writes it to `path`.
    pub fn write(&self, svg: &str, path: &Path) -> Result<(), PngError> {
        let png = self.render(svg)?;
        std::fs::write(path, png).map_err(|source| PngError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

impl Default for PngRenderer {
    fn default() -> Self {
        Self::new()
    }
}

/// The family to draw `sans-serif` with: the first of [`SANS_SERIF`] installed,
/// else any installed non-monospaced family (a label in the wrong face is better
/// than none), else any family; `None` when `db` holds no face.
fn pick_sans_serif(db: &fontdb::Database) -> Option<String> {
    let family = |f: &fontdb::FaceInfo| f.families.first().map(|(name, _)| name.clone());
    SANS_SERIF
        .iter()
        .find(|want| {
            db.faces()
                .any(|f| f.families.iter().any(|(name, _)| name == *want))
        })
        .map(ToString::to_string)
        .or_else(|| db.faces().filter(|f| !f.monospaced).find_map(family))
        .or_else(|| db.faces().find_map(family))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt_stats::plot::{boxplot_svg, Series};
    use std::collections::HashSet;

    fn boxplot() -> String {
        boxplot_svg(
            "EP under monitors",
            "seconds",
            &[
                Series {
                    label: "none (baseline)".into(),
                    values: vec![0.90, 0.91, 0.92, 0.95, 0.93, 1.4],
                },
                Series {
                    label: "quietwatt:perf 100 Hz".into(),
                    values: vec![0.92, 0.93, 0.94, 0.96, 0.95],
                },
            ],
        )
    }

    /// The SVG root's `width` and `height` attributes.
    fn svg_size(svg: &str) -> (u32, u32) {
        let attr = |name: &str| -> u32 {
            let start = svg.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
            let len = svg[start..].find('"').expect("closing quote");
            svg[start..start + len].parse().expect("integer size")
        };
        (attr("width"), attr("height"))
    }

    /// Decodes a PNG with tiny-skia's decoder (the `png` crate resvg already uses).
    fn decode(png: &[u8]) -> tiny_skia::Pixmap {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        tiny_skia::Pixmap::decode_png(png).expect("a PNG that decodes")
    }

    /// Pixels darker than the axis grey in rows `rows` of `pixmap`.
    fn dark_pixels(pixmap: &tiny_skia::Pixmap, rows: std::ops::Range<u32>) -> usize {
        let w = pixmap.width();
        pixmap
            .pixels()
            .iter()
            .enumerate()
            .filter(|(i, _)| rows.contains(&(*i as u32 / w)))
            .filter(|(_, p)| p.red() < 100 && p.green() < 100 && p.blue() < 100)
            .count()
    }

    #[test]
    fn a_boxplot_becomes_a_png_twice_its_size_with_its_boxes_and_title() {
        let svg = boxplot();
        let (w, h) = svg_size(&svg);
        let renderer = PngRenderer::new();
        let png = renderer.render(&svg).expect("render");
        let pixmap = decode(&png);
        assert_eq!((pixmap.width(), pixmap.height()), (2 * w, 2 * h));
        // Not blank: white, black, the two box fills (#f4a6a6, #a6c8f4), greys.
        let colours: HashSet<[u8; 4]> = pixmap
            .pixels()
            .iter()
            .map(|p| [p.red(), p.green(), p.blue(), p.alpha()])
            .collect();
        assert!(colours.len() >= 5, "{} colours", colours.len());
        for fill in [[0xf4, 0xa6, 0xa6, 255], [0xa6, 0xc8, 0xf4, 255]] {
            assert!(colours.contains(&fill), "no box filled with {fill:x?}");
        }
        assert!(pixmap.pixels().iter().all(|p| p.alpha() == 255), "opaque");
        // The title's baseline is at y = 22 (44 px at 2x): glyphs above it, where
        // nothing else is drawn, exactly when a font was found.
        let title = dark_pixels(&pixmap, 16..48);
        match renderer.sans_serif() {
            Some(family) => {
                assert!(title > 100, "{title} dark pixels in the title ({family})");
                assert!(renderer.font_warning().is_none());
            }
            None => {
                assert_eq!(title, 0);
                eprintln!("no font on this machine: text not checked");
            }
        }
    }

    #[test]
    fn without_fonts_the_png_has_its_shapes_but_no_text_and_a_warning() {
        let renderer = PngRenderer::with_fonts(fontdb::Database::new());
        assert_eq!(renderer.sans_serif(), None);
        let warning = renderer.font_warning().expect("a warning");
        assert!(warning.contains("fonts-dejavu-core"), "{warning}");
        let pixmap = decode(&renderer.render(&boxplot()).expect("render"));
        assert_eq!(dark_pixels(&pixmap, 16..48), 0, "no title without a font");
        assert!(
            pixmap
                .pixels()
                .iter()
                .any(|p| (p.red(), p.green(), p.blue()) == (0xf4, 0xa6, 0xa6)),
            "the boxes are still drawn"
        );
    }

    #[test]
    fn a_system_font_is_mapped_to_sans_serif_when_one_is_installed() {
        let mut db = fontdb::Database::new();
        db.load_system_fonts();
        let renderer = PngRenderer::new();
        assert_eq!(renderer.sans_serif().is_some(), !db.is_empty());
        if let Some(family) = renderer.sans_serif() {
            assert!(
                db.faces()
                    .any(|f| f.families.iter().any(|(name, _)| name == family)),
                "{family} is not installed"
            );
        }
    }

    #[test]
    fn bad_or_empty_svg_is_an_error_not_a_panic() {
        let renderer = PngRenderer::with_fonts(fontdb::Database::new());
        assert!(matches!(renderer.render("not svg"), Err(PngError::Svg(_))));
        let huge = r#"<svg xmlns="http://www.w3.org/2000/svg" width="100000" height="100000"/>"#;
        let e = renderer.render(huge).expect_err("too large");
        assert!(matches!(e, PngError::Size { width: 200000, .. }), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("missing").join("plot.png");
        let e = renderer.write(&boxplot(), &path).expect_err("no directory");
        assert!(e.to_string().contains("plot.png"), "{e}");
    }
}
