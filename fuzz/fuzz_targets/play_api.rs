//! `sluice play`'s request checks (`sluice_cmd::play_guard`): an arbitrary request (the
//! first line `METHOD TARGET`, then `name: value` header lines, then a blank line and a
//! body) against a server on one of a few addresses. Never a panic; what is admitted always
//! carried the token (cookie, header, or `?token=` on `GET /`), or asked for one of the
//! page's public files; a Host that is a name other than `localhost` is never admitted.
//! The body goes through the nesting bound every config passes before it is parsed.
#![no_main]

use hyper::header::{HeaderName, HeaderValue, HOST};
use hyper::{HeaderMap, Method, Uri};
use libfuzzer_sys::fuzz_target;
use sluice_cmd::play_guard::{Admit, Guard, PUBLIC_PATHS};

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let listen = ["127.0.0.1", "0.0.0.0", "192.168.1.5", "::1"][usize::from(which % 4)];
    let guard = Guard::new(listen.parse().unwrap(), 8080, TOKEN.into());
    let text = String::from_utf8_lossy(rest);
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let Some((method, target)) = lines.next().and_then(|l| l.split_once(' ')) else {
        return;
    };
    let (Ok(method), Ok(uri)) = (Method::from_bytes(method.as_bytes()), target.parse::<Uri>())
    else {
        return;
    };
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { continue };
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.trim().as_bytes()),
            HeaderValue::from_str(v.trim()),
        ) {
            headers.append(k, v);
        }
    }

    if let Ok(admit) = guard.check(&method, &uri, &headers) {
        let all = |name: &str| -> String {
            headers
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect()
        };
        let carried = all("cookie").contains(TOKEN)
            || all("x-sluice-token").contains(TOKEN)
            || uri.query().is_some_and(|q| q.contains(TOKEN));
        match admit {
            Admit::SetCookie(c) => assert!(c.contains(TOKEN) && uri.path() == "/"),
            Admit::Route => assert!(
                carried || PUBLIC_PATHS.contains(&uri.path()),
                "admitted without the token: {method} {uri} {headers:?}"
            ),
        }
        let host = headers.get(HOST).map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
        let host = host.unwrap_or_default();
        let name = host.rsplit_once(':').map_or(host.as_str(), |(n, _)| n);
        let name = name.trim_start_matches('[').trim_end_matches(']');
        assert!(
            name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok(),
            "admitted Host {host:?}"
        );
    }

    let _ = sluice_config::nesting::check(body);
});
