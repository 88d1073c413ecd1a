//! The archive checker (zip and tar.gz) under the default limits; run with a memory limit
//! (`infra/local/fuzz` passes `-rss_limit_mb=512` for this target) so an allocation taken
//! from a header's count is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_formats::archive;
use sluice_formats::container::ContainerLimits;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let limits = ContainerLimits::default();
    if selector % 2 == 0 {
        let _ = archive::zip::check(bytes, limits, &mut |_, _| Ok(()));
    } else {
        let _ = archive::tar::check(bytes, limits);
    }
});
