//! KPL deaggregation: any bytes are a plain record, an aggregate's user records, or an error
//! for a corrupt aggregate, without a panic; an aggregate sluice writes reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_platform::kpl::{aggregate, deaggregate};

fuzz_target!(|data: &[u8]| {
    let _ = deaggregate(&bytes::Bytes::copy_from_slice(data));
    // The input's halves as two user records: they come back as written.
    let (a, b) = data.split_at(data.len() / 2);
    let blob = aggregate(&[("pk-a", a), ("pk-b", b)]);
    let users = deaggregate(&bytes::Bytes::from(blob))
        .expect("an aggregate sluice wrote reads")
        .expect("and is an aggregate");
    assert_eq!(users.len(), 2);
    assert_eq!(&users[0].data[..], a);
    assert_eq!(&users[1].data[..], b);
});
