use dumpview::model::manifest::Record;
use std::time::Instant;
fn main() {
    let p = std::env::args().nth(1).unwrap();
    let f = std::fs::File::open(&p).unwrap();
    let m = unsafe { memmap2::MmapOptions::new().populate().map(&f) }.unwrap();
    let lines: Vec<&[u8]> = m
        .split(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"  {"))
        .map(|l| l.strip_suffix(b",").unwrap_or(l))
        .collect();
    for _ in 0..3 {
        let t = Instant::now();
        let mut n = 0usize;
        let mut ok = 0;
        for l in &lines {
            if let Some(r) = dumpview::model::parse::line::record(l) {
                ok += 1;
                n += r.seq as usize;
            }
        }
        println!(
            "fast, no keep {:?} {n} ok {ok}/{}",
            t.elapsed(),
            lines.len()
        );
        let t = Instant::now();
        let mut v: Vec<Record> = Vec::with_capacity(lines.len());
        for l in &lines {
            v.push(dumpview::model::parse::line::record(l).unwrap());
        }
        println!("fast, keep {:?}", t.elapsed());
        let t = Instant::now();
        drop(v);
        println!("drop {:?}", t.elapsed());
        let t = Instant::now();
        let mut n = 0.0;
        for l in &lines {
            let i = l.windows(9).position(|w| w == b"\"mean\": ").unwrap_or(0);
            let _ = i;
            for tok in [
                &b"0.017306514084339142"[..],
                b"-15.853062629699707",
                b"657.6638793945312",
                b"14.714829444885254",
                b"15.853062629699707",
                b"1e-05",
            ] {
                n += serde_json::from_slice::<f64>(tok).unwrap();
            }
        }
        println!("6 serde f64 per line {:?} {n}", t.elapsed());
    }
}
