//! A roofline of the modelled run as SVG: the CPEs' peak, the DMA roof, and each kernel at
//! its arithmetic intensity (flops per DMA byte) and modelled GFLOPS, drawn as a disc whose
//! area is its share of the modelled time and whose colour is its bound.

use std::fmt::Write as _;

use serde_json::Value;
use swflow_scheduler::target::Target;

use super::bench::KernelRow;

/// A kernel on the roofline.
pub struct Point {
    pub kernel: String,
    pub op: String,
    pub intensity: f64,
    pub gflops: f64,
    pub seconds: f64,
    pub bound: String,
}

impl Point {
    /// The kernel's point, when it has both floating-point work and DMA traffic (the others
    /// have no place on logarithmic axes).
    pub fn from_row(k: &KernelRow) -> Option<Point> {
        let get = |key: &str| k.stats.get(key).and_then(Value::as_f64);
        let flops = get("flops")?;
        let bytes = get("dma_bytes")?;
        let seconds = get("modelled_seconds")?;
        (flops > 0.0 && bytes > 0.0 && seconds > 0.0).then(|| Point {
            kernel: k.kernel.clone(),
            op: k.op.clone(),
            intensity: flops / bytes,
            gflops: get("gflops").unwrap_or(0.0),
            seconds,
            bound: k.stats.get("bound").and_then(Value::as_str).unwrap_or("-").to_string(),
        })
    }
}

const W: f64 = 960.0;
const H: f64 = 640.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;

fn colour(bound: &str) -> &'static str {
    match bound {
        "compute" => "#1f77b4",
        "dma" => "#d62728",
        _ => "#ff7f0e",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG text of the roofline titled `title`.
pub fn draw(title: &str, target: &Target, points: &[Point]) -> String {
    let t = &target.timing.dma;
    let peak = target.peak_flops() / 1e9;
    // The DMA roof: two gets to one put (a triad's mix) at the model's line bandwidths.
    let roof_gbps = 3.0 / (2.0 / t.get_bytes_per_cycle + 1.0 / t.put_bytes_per_cycle) * target.clock_hz / 1e9;
    let ridge = peak / roof_gbps;
    let lo_x = points.iter().map(|p| p.intensity).fold(ridge / 64.0, f64::min) / 2.0;
    let hi_x = points.iter().map(|p| p.intensity).fold(ridge * 8.0, f64::max) * 2.0;
    let lo_y = points
        .iter()
        .map(|p| p.gflops)
        .fold(lo_x * roof_gbps, f64::min)
        .max(1e-6)
        / 2.0;
    let hi_y = peak * 3.0;
    let (x0, x1) = (lo_x.log10().floor(), hi_x.log10().ceil());
    let (y0, y1) = (lo_y.log10().floor(), hi_y.log10().ceil());
    let px = |x: f64| LEFT + (x.log10() - x0) / (x1 - x0) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - (y.log10() - y0) / (y1 - y0) * (H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(s, "<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"28\" font-size=\"16\">Roofline: {} (modelled by the swflow emulator)</text>",
        escape(title)
    );
    for e in (x0 as i32)..=(x1 as i32) {
        let x = px(10f64.powi(e));
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">1e{e}</text>",
            H - BOTTOM,
            H - BOTTOM + 18.0
        );
    }
    for e in (y0 as i32)..=(y1 as i32) {
        let y = py(10f64.powi(e));
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">1e{e}</text>",
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\"/>",
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">arithmetic intensity (flops per DMA byte)</text>",
        (LEFT + W - RIGHT) / 2.0,
        H - 20.0
    );
    let _ = writeln!(
        s,
        "<text transform=\"translate(24 {:.1}) rotate(-90)\" text-anchor=\"middle\">GFLOPS</text>",
        (TOP + H - BOTTOM) / 2.0
    );
    // The roof: bandwidth-bound up to the ridge, then the peak.
    let (ax, bx) = (10f64.powf(x0), 10f64.powf(x1));
    let start = (ax, (ax * roof_gbps).max(10f64.powf(y0)));
    let start = (start.1 / roof_gbps, start.1);
    let _ = writeln!(
        s,
        "<polyline points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"none\" stroke=\"black\" stroke-width=\"2\"/>",
        px(start.0),
        py(start.1),
        px(ridge),
        py(peak),
        px(bx),
        py(peak)
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">peak {peak:.1} GFLOPS ({} CPEs x {} flops/cycle)</text>",
        W - RIGHT - 6.0,
        py(peak) - 6.0,
        target.cpes,
        target.flops_per_cycle
    );
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" transform=\"rotate(-{:.1} {:.1} {:.1})\">DMA {roof_gbps:.1} GB/s (2 gets : 1 put)</text>",
        px(start.0) + 10.0,
        py(start.1) - 8.0,
        ((py(start.1) - py(peak)) / (px(ridge) - px(start.0))).atan().to_degrees(),
        px(start.0) + 10.0,
        py(start.1) - 8.0
    );
    let total: f64 = points.iter().map(|p| p.seconds).sum::<f64>().max(f64::MIN_POSITIVE);
    let mut order: Vec<&Point> = points.iter().collect();
    order.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    for p in order.iter().rev() {
        let r = 2.5 + 28.0 * (p.seconds / total).sqrt();
        let _ = writeln!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r:.1}\" fill=\"{}\" fill-opacity=\"0.45\" stroke=\"{}\"><title>{} ({}): {:.3} GFLOPS at {:.3} flop/B, {:.4} ms</title></circle>",
            px(p.intensity),
            py(p.gflops),
            colour(&p.bound),
            colour(&p.bound),
            escape(&p.kernel),
            escape(&p.op),
            p.gflops,
            p.intensity,
            p.seconds * 1e3
        );
    }
    for (i, p) in order.iter().take(5).enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
            px(p.intensity) + 4.0,
            py(p.gflops) + 4.0,
            i + 1
        );
    }
    let lx = W - RIGHT + 16.0;
    let _ = writeln!(s, "<text x=\"{lx}\" y=\"{TOP}\" font-weight=\"bold\">bound</text>");
    for (i, b) in ["compute", "dma", "latency"].iter().enumerate() {
        let y = TOP + 20.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"6\" fill=\"{}\" fill-opacity=\"0.45\" stroke=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{b}</text>",
            lx + 6.0,
            y - 4.0,
            colour(b),
            colour(b),
            lx + 18.0,
            y
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{lx}\" y=\"{:.1}\">disc area: share of time</text>",
        TOP + 90.0
    );
    let _ = writeln!(
        s,
        "<text x=\"{lx}\" y=\"{:.1}\" font-weight=\"bold\">slowest kernels</text>",
        TOP + 120.0
    );
    for (i, p) in order.iter().take(5).enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"{lx}\" y=\"{:.1}\" font-size=\"11\">{} {} ({}) {:.1}%</text>",
            TOP + 138.0 + 16.0 * i as f64,
            i + 1,
            escape(&p.kernel),
            escape(&p.op),
            100.0 * p.seconds / total
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{lx}\" y=\"{:.1}\" font-size=\"11\">{} kernels drawn</text>",
        TOP + 230.0,
        points.len()
    );
    s.push_str("</svg>\n");
    s
}
