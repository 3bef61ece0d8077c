// include_dir! does not tell cargo which files it read; without this, new or
// regenerated example dumps would not reach the binary until a clean build.
fn main() {
    println!("cargo:rerun-if-changed=assets/examples");
    println!("cargo:rerun-if-changed=assets/dump_probe.py");
    torch_rpath();
}

// Feature `torch`: torch-sys links libtorch dynamically but puts no run path into the
// binaries that use it (its `-Wl,-rpath` flag reaches only its own C++ objects, never a
// link). Every binary, test and example of this package gets libtorch's directory as its
// rpath instead, so it runs without LD_LIBRARY_PATH while that directory stays where it was
// at build time (the venv's `torch/lib`).
fn torch_rpath() {
    if std::env::var_os("CARGO_FEATURE_TORCH").is_none() {
        return;
    }
    let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") else {
        println!(
            "cargo:warning=feature torch: torch-sys gave no libtorch directory; set LD_LIBRARY_PATH to libtorch's lib directory at run time"
        );
        return;
    };
    let target = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target == "linux" || target == "macos" {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.to_string_lossy());
    }
}
