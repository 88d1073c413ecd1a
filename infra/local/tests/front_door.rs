//! The `sluice-local` binary itself: it refuses, before touching anything, to serve its
//! development identity provider on an address other machines reach.

#[test]
fn the_front_door_refuses_to_start_on_a_non_loopback_address() {
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let run = std::process::Command::new(env!("CARGO_BIN_EXE_sluice-local"))
            .env("SLUICE_API_ADDR", addr)
            .output()
            .expect("sluice-local runs");
        assert!(!run.status.success(), "{addr}: it started");
        let said = String::from_utf8_lossy(&run.stderr);
        assert!(said.contains("is not a loopback address"), "{addr}: {said}");
    }
}
