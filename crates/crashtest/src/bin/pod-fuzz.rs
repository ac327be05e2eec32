//! `pod-fuzz`: the stable-toolchain fuzz driver. Mutates the committed seed
//! corpus (`fuzz/corpus/<target>/`) with a seeded generator and runs the same
//! bodies as the `cargo fuzz` targets (`pod_crashtest::fuzz`), reporting the
//! first input that panics (saved under `fuzz/artifacts/<target>/`).
//!
//! ```sh
//! cargo run --release -p pod-crashtest --bin pod-fuzz -- --iterations 200000 --seed 1
//! cargo run --release -p pod-crashtest --bin pod-fuzz -- --target sse --iterations 1000000
//! cargo run -p pod-crashtest --bin pod-fuzz -- --replay fuzz/artifacts/sse/crash-...
//! ```

use anyhow::{bail, Context, Result};
use pod_crashtest::fuzz::{run_target, TARGETS};
use pod_crashtest::mutate::mutate;
use pod_crashtest::rng::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

const USAGE: &str =
    "usage: pod-fuzz [--target NAME|all] [--iterations N] [--seed S] [--corpus DIR] \
[--replay FILE --target NAME]
  targets: log_line log_payload parse_log sse openai_stream anthropic_stream responses_stream";

fn main() {
    if let Err(err) = real_main() {
        eprintln!("{err:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut target = "all".to_string();
    let mut iterations: u64 = 20_000;
    let mut seed: u64 = 1;
    let mut corpus = fuzz_dir.join("corpus");
    let mut replay: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--target" => target = value()?,
            "--iterations" => iterations = value()?.parse().context("--iterations")?,
            "--seed" => seed = value()?.parse().context("--seed")?,
            "--corpus" => corpus = PathBuf::from(value()?),
            "--replay" => replay = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let targets: Vec<&str> = match target.as_str() {
        "all" => TARGETS.to_vec(),
        name if TARGETS.contains(&name) => vec![name],
        other => bail!("unknown target {other:?}\n{USAGE}"),
    };
    if let Some(file) = replay {
        let data =
            std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
        for name in targets {
            run_target(name, &data);
            println!("{name}: {} ran without a panic", file.display());
        }
        return Ok(());
    }
    // Panics are expected findings: report them ourselves, once.
    std::panic::set_hook(Box::new(|_| {}));
    for name in targets {
        let seeds = load_seeds(&corpus.join(name))?;
        let mut rng = Rng::new(seed);
        for i in 0..iterations {
            let base = &seeds[rng.below(seeds.len() as u64) as usize];
            let input = if i < seeds.len() as u64 {
                seeds[i as usize].clone()
            } else {
                mutate(&mut rng, base, &seeds)
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| run_target(name, &input)));
            if let Err(panic) = outcome {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let saved = save_artifact(&fuzz_dir, name, &input)?;
                bail!(
                    "{name}: panic at iteration {i} (seed {seed}): {message}\ninput saved to {}\n\
                     reproduce: pod-fuzz --target {name} --replay {}",
                    saved.display(),
                    saved.display()
                );
            }
        }
        println!(
            "{name}: {iterations} inputs from {} seeds (seed {seed}), no panic",
            seeds.len()
        );
    }
    Ok(())
}

fn load_seeds(dir: &Path) -> Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("no corpus at {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    // Sorted: the same seed picks the same inputs everywhere.
    paths.sort();
    let mut seeds = Vec::new();
    for path in paths {
        seeds
            .push(std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?);
    }
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    Ok(seeds)
}

fn save_artifact(fuzz_dir: &Path, name: &str, input: &[u8]) -> Result<PathBuf> {
    let dir = fuzz_dir.join("artifacts").join(name);
    std::fs::create_dir_all(&dir)?;
    // FNV-1a: a stable name per input.
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let path = dir.join(format!("crash-{hash:016x}"));
    std::fs::write(&path, input)?;
    Ok(path)
}
