//! Generates the pprof `profile.proto` types (`src/output/pprof.rs` includes them).
//! protox parses the vendored file, so building needs no `protoc`.
//! `proto/profile.proto` is github.com/google/pprof's `proto/profile.proto`
//! as of its commit 101d87ff, unchanged (Apache-2.0, header kept).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/profile.proto");
    let descriptors = protox::compile(["profile.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
