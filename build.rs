// include_dir! does not tell cargo which files it read; without this, new or
// regenerated example dumps would not reach the binary until a clean build.
fn main() {
    println!("cargo:rerun-if-changed=assets/examples");
    println!("cargo:rerun-if-changed=assets/dump_probe.py");
}
