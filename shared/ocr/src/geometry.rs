//! From the detector's probability map to rotated line rectangles, and from a rectangle
//! back to a straight line image for the recognizer.

use image::{GrayImage, Luma};
use imageproc::contours::{BorderType, find_contours};
use imageproc::geometry::min_area_rect;
use imageproc::point::Point;

/// A text line: its centre, its extent along and across the text, and the text's direction
/// (radians from the x axis, within ±45°: scanned documents read left to right).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotatedRect {
    pub cx: f32,
    pub cy: f32,
    pub width: f32,
    pub height: f32,
    pub angle: f32,
}

impl RotatedRect {
    pub fn aspect(&self) -> f32 {
        self.width / self.height.max(1.0)
    }

    /// The rectangle in a frame scaled by `sx`, `sy` (small angles: the sides scale with
    /// their axis).
    pub fn scaled(self, sx: f32, sy: f32) -> Self {
        let (sin, cos) = self.angle.sin_cos();
        Self {
            cx: self.cx * sx,
            cy: self.cy * sy,
            width: self.width * (cos * sx).hypot(sin * sy),
            height: self.height * (sin * sx).hypot(cos * sy),
            angle: (self.angle.sin() * sy).atan2(self.angle.cos() * sx),
        }
    }

    pub fn top(&self) -> f32 {
        self.cy - self.height / 2.0
    }

    pub fn bottom(&self) -> f32 {
        self.cy + self.height / 2.0
    }

    pub fn left(&self) -> f32 {
        self.cx - self.width * self.angle.cos() / 2.0
    }

    /// The part of the rectangle from `u0` to `u1` along its text (0 is its left end).
    pub fn piece(&self, u0: f32, u1: f32) -> Self {
        let (sin, cos) = self.angle.sin_cos();
        let shift = (u0 + u1) / 2.0 - self.width / 2.0;
        Self { cx: self.cx + shift * cos, cy: self.cy + shift * sin, width: u1 - u0, ..*self }
    }

    /// The point `u` along the text's centre line, on the page.
    pub fn along(&self, u: f32) -> (f32, f32) {
        let (sin, cos) = self.angle.sin_cos();
        let shift = u - self.width / 2.0;
        (self.cx + shift * cos, self.cy + shift * sin)
    }

    /// The rectangle through four corners in order (as `min_area_rect` gives them).
    fn from_corners(corners: &[Point<i32>; 4]) -> Self {
        let p = corners.map(|c| (c.x as f32, c.y as f32));
        let cx = p.iter().map(|c| c.0).sum::<f32>() / 4.0;
        let cy = p.iter().map(|c| c.1).sum::<f32>() / 4.0;
        let edge = |a: (f32, f32), b: (f32, f32)| (b.0 - a.0, b.1 - a.1);
        let (e1, e2) = (edge(p[0], p[1]), edge(p[1], p[2]));
        // The side nearer horizontal is the text's direction.
        let (along, across) = if e1.0.abs() >= e1.1.abs() { (e1, e2) } else { (e2, e1) };
        let along = if along.0 < 0.0 { (-along.0, -along.1) } else { along };
        Self { cx, cy, width: along.0.hypot(along.1), height: across.0.hypot(across.1), angle: along.1.atan2(along.0) }
    }
}

/// The line regions of a probability map: pixels above `threshold`, grown by one pixel,
/// traced as outer contours, fitted with minimum-area rectangles, kept when their pixels'
/// mean probability reaches `box_threshold`, and grown back by the unclip distance.
pub fn text_regions(
    probabilities: &[f32],
    width: u32,
    height: u32,
    threshold: f32,
    box_threshold: f32,
    unclip_ratio: f32,
) -> Vec<RotatedRect> {
    let mask = GrayImage::from_fn(width, height, |x, y| {
        Luma([if probabilities[(y * width + x) as usize] > threshold { 255 } else { 0 }])
    });
    // Grown by a pixel all round: tighter boxes cut into the letters' edges, and the
    // recognizer then loses word spaces.
    let mask = imageproc::morphology::dilate(&mask, imageproc::distance_transform::Norm::LInf, 1);
    let mut regions = Vec::new();
    for contour in find_contours::<i32>(&mask) {
        if contour.border_type != BorderType::Outer || contour.parent.is_some() || contour.points.len() < 4 {
            continue;
        }
        let rect = RotatedRect::from_corners(&min_area_rect(&contour.points));
        if rect.width.min(rect.height) < 3.0 {
            continue;
        }
        if region_score(probabilities, width, height, &contour.points, threshold) < box_threshold {
            continue;
        }
        let distance = rect.width * rect.height * unclip_ratio / (2.0 * (rect.width + rect.height));
        regions.push(RotatedRect { width: rect.width + 2.0 * distance, height: rect.height + 2.0 * distance, ..rect });
    }
    regions
}

/// The mean probability of the text pixels inside a contour's bounding box.
fn region_score(probabilities: &[f32], width: u32, height: u32, points: &[Point<i32>], threshold: f32) -> f32 {
    let (mut x0, mut y0, mut x1, mut y1) = (i32::MAX, i32::MAX, i32::MIN, i32::MIN);
    for p in points {
        (x0, y0, x1, y1) = (x0.min(p.x), y0.min(p.y), x1.max(p.x), y1.max(p.y));
    }
    let (x0, y0) = (x0.max(0) as u32, y0.max(0) as u32);
    let (x1, y1) = ((x1.max(0) as u32).min(width - 1), (y1.max(0) as u32).min(height - 1));
    let (mut sum, mut count) = (0f32, 0u32);
    for y in y0..=y1 {
        for &p in &probabilities[(y * width + x0) as usize..=(y * width + x1) as usize] {
            if p > threshold {
                sum += p;
                count += 1;
            }
        }
    }
    if count == 0 { 0.0 } else { sum / count as f32 }
}

/// Samples `line` straight into a `width` × `height` image (bilinear), calling `put` with
/// each output pixel's position and grey value; outside the page reads as white.
pub fn sample_line(page: &GrayImage, line: &RotatedRect, width: u32, height: u32, mut put: impl FnMut(u32, u32, f32)) {
    let scale_x = line.width / width as f32;
    let scale_y = line.height / height as f32;
    let (sin, cos) = line.angle.sin_cos();
    for y in 0..height {
        let v = (y as f32 + 0.5) * scale_y - line.height / 2.0;
        for x in 0..width {
            let u = (x as f32 + 0.5) * scale_x - line.width / 2.0;
            let sx = line.cx + u * cos - v * sin;
            let sy = line.cy + u * sin + v * cos;
            put(x, y, bilinear(page, sx - 0.5, sy - 0.5));
        }
    }
}

/// The blank stretches across a line, `(from, to)` along it in page pixels, the line's ends
/// left out: where no column of the line holds more dark pixels (below `ink`) than a
/// speck of noise does.
pub fn blank_runs(page: &GrayImage, line: &RotatedRect, ink: u8) -> Vec<(f32, f32)> {
    let (dark, height, scale) = dark_columns(page, line, ink);
    let noise = speck(height);
    let mut runs = Vec::new();
    let mut start: Option<usize> = None;
    let mut seen_ink = false;
    for (x, &count) in dark.iter().enumerate() {
        if count < noise {
            if start.is_none() && seen_ink {
                start = Some(x);
            }
        } else {
            if let Some(from) = start.take() {
                runs.push((from as f32 * scale, x as f32 * scale));
            }
            seen_ink = true;
        }
    }
    runs
}

/// The fewest dark pixels in a column, `height` rows high, that are ink: two are, as a dash
/// or a rule is a thin stroke and a speck a dot.
fn speck(height: u32) -> u32 {
    (height / 20).max(2)
}

/// The dark pixels (below `ink`) of `line` sampled at the page's own resolution, counted
/// per column along the text and per row across it.
struct DarkPixels {
    columns: Vec<u32>,
    rows: Vec<u32>,
}

fn dark_pixels(page: &GrayImage, line: &RotatedRect, ink: u8) -> DarkPixels {
    let width = line.width.ceil().clamp(1.0, 8000.0) as u32;
    let height = line.height.ceil().clamp(1.0, 400.0) as u32;
    let mut dark = DarkPixels { columns: vec![0; width as usize], rows: vec![0; height as usize] };
    sample_line(page, line, width, height, |x, y, value| {
        if value < f32::from(ink) {
            dark.columns[x as usize] += 1;
            dark.rows[y as usize] += 1;
        }
    });
    dark
}

/// How many dark pixels each column across `line` holds, the rows sampled, and page pixels
/// per column.
fn dark_columns(page: &GrayImage, line: &RotatedRect, ink: u8) -> (Vec<u32>, u32, f32) {
    let dark = dark_pixels(page, line, ink);
    let (width, height) = (dark.columns.len(), dark.rows.len() as u32);
    (dark.columns, height, line.width / width as f32)
}

/// `line` cut down along its text to its first and last inked columns, with `pad` page
/// pixels beside them (within the line); the line itself when it holds no ink.
pub fn trim_to_ink(page: &GrayImage, line: &RotatedRect, ink: u8, pad: f32) -> RotatedRect {
    let (dark, height, scale) = dark_columns(page, line, ink);
    let noise = speck(height);
    let first = dark.iter().position(|&c| c >= noise);
    let last = dark.iter().rposition(|&c| c >= noise);
    match (first, last) {
        (Some(first), Some(last)) => {
            let from = (first as f32 * scale - pad).max(0.0);
            let to = ((last + 1) as f32 * scale + pad).min(line.width);
            line.piece(from, to)
        }
        _ => *line,
    }
}

/// `line` shrunk across its text to the rows its ink fills, with `margin` of the ink's
/// height above and below (never grown).
pub fn fit_to_ink(page: &GrayImage, line: &RotatedRect, ink: u8, margin: f32) -> RotatedRect {
    let dark = dark_pixels(page, line, ink);
    let enough = (dark.columns.len() as u32 / 50).max(2);
    let first = dark.rows.iter().position(|&c| c >= enough);
    let last = dark.rows.iter().rposition(|&c| c >= enough);
    let (Some(first), Some(last)) = (first, last) else { return *line };
    let scale = line.height / dark.rows.len() as f32;
    let (top, bottom) = (first as f32 * scale, (last + 1) as f32 * scale);
    let inked = bottom - top;
    let fitted = (inked * (1.0 + 2.0 * margin)).min(line.height);
    if fitted >= line.height * 0.95 {
        return *line;
    }
    // The ink's centre, across the text from the line's centre.
    let shift = (top + bottom) / 2.0 - line.height / 2.0;
    let (sin, cos) = line.angle.sin_cos();
    RotatedRect { cx: line.cx - shift * sin, cy: line.cy + shift * cos, height: fitted, ..*line }
}

fn bilinear(page: &GrayImage, x: f32, y: f32) -> f32 {
    let (width, height) = (i64::from(page.width()), i64::from(page.height()));
    // Truncation is the floor at or right of zero, and far cheaper than `floor` (a libm call
    // on x86-64's baseline); every line sampled reads millions of points.
    let floor = |v: f32| if v >= 0.0 { v as i64 } else { v.floor() as i64 };
    let (x0, y0) = (floor(x), floor(y));
    let (fx, fy) = (x - x0 as f32, y - y0 as f32);
    let (top_left, top_right, bottom_left, bottom_right) = if x0 >= 0 && y0 >= 0 && x0 + 1 < width && y0 + 1 < height {
        // All four neighbours on the page: read the buffer without a bounds test each.
        let raw = page.as_raw();
        let (i, stride) = ((y0 * width + x0) as usize, width as usize);
        (raw[i], raw[i + 1], raw[i + stride], raw[i + stride + 1])
    } else {
        // Off the page is paper.
        let pixel = |x: i64, y: i64| {
            if x < 0 || y < 0 || x >= width || y >= height { 255 } else { page.get_pixel(x as u32, y as u32).0[0] }
        };
        (pixel(x0, y0), pixel(x0 + 1, y0), pixel(x0, y0 + 1), pixel(x0 + 1, y0 + 1))
    };
    let top = f32::from(top_left) * (1.0 - fx) + f32::from(top_right) * fx;
    let bottom = f32::from(bottom_left) * (1.0 - fx) + f32::from(bottom_right) * fx;
    top * (1.0 - fy) + bottom * fy
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_bar_is_one_rotated_region_with_its_direction() {
        let (w, h) = (200u32, 100u32);
        let angle = 2f32.to_radians();
        let probabilities: Vec<f32> = (0..w * h)
            .map(|i| {
                let (x, y) = ((i % w) as f32, (i / w) as f32);
                let centre_line = 50.0 + (x - 100.0) * angle.tan();
                if (20.0..180.0).contains(&x) && (y - centre_line).abs() < 5.0 { 0.9 } else { 0.0 }
            })
            .collect();
        let regions = text_regions(&probabilities, w, h, 0.3, 0.5, 1.6);
        assert_eq!(regions.len(), 1, "{regions:?}");
        let region = regions[0];
        assert!((region.angle - angle).abs() < 0.5f32.to_radians(), "{region:?}");
        assert!((region.cx - 100.0).abs() < 2.0 && (region.cy - 50.0).abs() < 2.0, "{region:?}");
        assert!(region.width > 160.0 && region.height > 10.0 && region.height < 40.0, "{region:?}");
    }

    #[test]
    fn blank_runs_are_the_gaps_between_inked_stretches() {
        // Ink at x 10..30, 40..50 and 80..90 (a speck at 60): two gaps, the speck ignored.
        let page = GrayImage::from_fn(100, 20, |x, y| {
            let inked = (10..30).contains(&x) || (40..50).contains(&x) || (80..90).contains(&x) || (x == 60 && y == 10);
            Luma([if inked && (4..16).contains(&y) { 0 } else { 255 }])
        });
        let line = RotatedRect { cx: 50.0, cy: 10.0, width: 100.0, height: 20.0, angle: 0.0 };
        let runs = blank_runs(&page, &line, 128);
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert!((runs[0].0 - 30.0).abs() <= 1.0 && (runs[0].1 - 40.0).abs() <= 1.0, "{runs:?}");
        assert!((runs[1].0 - 50.0).abs() <= 1.0 && (runs[1].1 - 80.0).abs() <= 1.0, "{runs:?}");
        let piece = line.piece(40.0, 50.0);
        assert_eq!((piece.cx, piece.width), (45.0, 10.0));
        assert_eq!(line.along(0.0), (0.0, 10.0));
    }

    #[test]
    fn faint_regions_are_dropped() {
        let probabilities = vec![0.35f32; 64 * 64];
        assert!(text_regions(&probabilities, 64, 64, 0.3, 0.5, 1.6).is_empty());
    }

    #[test]
    fn bilinear_interpolates_inside_and_reads_paper_off_the_page() {
        // A page whose pixels are a plane (3x + 5y): inside it, bilinear sampling is exact.
        let page = GrayImage::from_fn(20, 10, |x, y| Luma([(3 * x + 5 * y) as u8]));
        for (x, y) in [(0.0, 0.0), (4.25, 2.5), (18.9, 8.99), (7.5, 0.125)] {
            assert!((bilinear(&page, x, y) - (3.0 * x + 5.0 * y)).abs() < 1e-3, "at ({x}, {y})");
        }
        // Past the last column, and left of the first, the missing neighbours are white.
        assert!((bilinear(&page, 19.5, 0.0) - (57.0 * 0.5 + 255.0 * 0.5)).abs() < 1e-3);
        assert!((bilinear(&page, -0.5, 0.0) - (255.0 * 0.5)).abs() < 1e-3);
        assert_eq!(bilinear(&page, -3.0, -7.0), 255.0);
    }

    #[test]
    fn a_line_is_sampled_straight() {
        // A black square on white, read back through an unrotated rectangle around it.
        let page = GrayImage::from_fn(40, 20, |x, y| {
            Luma([if (10..30).contains(&x) && (5..15).contains(&y) { 0 } else { 255 }])
        });
        let line = RotatedRect { cx: 20.0, cy: 10.0, width: 20.0, height: 10.0, angle: 0.0 };
        let mut sum = 0f32;
        sample_line(&page, &line, 20, 10, |_, _, v| sum += v);
        assert!(sum / 200.0 < 30.0, "the inside is dark: {}", sum / 200.0);
        let outside = RotatedRect { cx: 100.0, ..line };
        let mut min = f32::MAX;
        sample_line(&page, &outside, 20, 10, |_, _, v| min = min.min(v));
        assert_eq!(min, 255.0);
    }
}
