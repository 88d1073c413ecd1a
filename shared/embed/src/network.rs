//! Where Sluice's outbound HTTP may go. Embedding addresses come from tenants, so none is
//! trusted to be public: a name is resolved, and only public addresses — or those in the
//! networks the operator allow-lists (`SLUICE_ALLOWED_PRIVATE_NETWORKS`, CIDRs) — are
//! connected to. The check runs inside the client's resolver, so the address checked is the
//! address connected to (a name that re-resolves elsewhere between check and connect
//! cannot slip through), and literal addresses are checked before a request is made.

use ipnet::IpNet;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::OnceLock;

/// Whether `url` is reached over TLS: the only way a key leaves for an address a member of
/// an organization registered.
pub fn is_https(url: &str) -> bool {
    url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// The variable naming the private networks the deployment's own services live in.
pub const ALLOWED_NETWORKS_VARIABLE: &str = "SLUICE_ALLOWED_PRIVATE_NETWORKS";

/// The networks beyond the public internet an address may be in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkPolicy {
    allowed: Vec<IpNet>,
}

impl NetworkPolicy {
    /// Networks separated by commas or spaces, each a CIDR or a single address.
    pub fn parse(text: &str) -> Result<Self, String> {
        let allowed = text
            .split([',', ' '])
            .filter(|part| !part.is_empty())
            .map(|part| {
                part.parse::<IpNet>()
                    .or_else(|_| part.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{ALLOWED_NETWORKS_VARIABLE}: {part:?} is not a network (CIDR) or address"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { allowed })
    }

    /// The policy `SLUICE_ALLOWED_PRIVATE_NETWORKS` sets (none: public addresses only).
    pub fn from_env() -> Result<Self, String> {
        Self::parse(&std::env::var(ALLOWED_NETWORKS_VARIABLE).unwrap_or_default())
    }

    /// The process's policy. A function checks `from_env` at start and refuses to run on a
    /// bad value; should one not, a bad value allows nothing beyond the public internet.
    pub fn current() -> &'static Self {
        static POLICY: OnceLock<NetworkPolicy> = OnceLock::new();
        POLICY.get_or_init(|| {
            Self::from_env().unwrap_or_else(|error| {
                tracing::error!(error, "private networks not allowed");
                Self::default()
            })
        })
    }

    /// Whether `ip` is on the allow-list (not merely public).
    pub fn allow_lists(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.allowed.iter().any(|net| net.contains(&ip))
    }

    pub fn permits(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allow_lists(ip)
    }

    /// A tenant's service address, checked for its shape (`plain_url`) and, when its host is
    /// a literal address, for where it leads.
    pub fn check_url(&self, text: &str) -> Result<Url, String> {
        let url = plain_url(text)?;
        match literal_ip(&url) {
            Some(ip) if !self.permits(ip) => Err(not_public()),
            _ => Ok(url),
        }
    }

    /// `check_url`, then every address the host resolves to must be permitted: a service
    /// is registered only where it can be reached, and never at a name that leads inward.
    pub async fn check_resolved(&self, text: &str) -> Result<Url, String> {
        let url = self.check_url(text)?;
        let host = match literal_ip(&url) {
            Some(ip) => ip.to_string(),
            None => url.host_str().unwrap_or_default().to_owned(),
        };
        let port = url.port_or_known_default().unwrap_or(443);
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|_| format!("{host} does not resolve"))?
            .collect();
        if addresses.is_empty() {
            return Err(format!("{host} does not resolve"));
        }
        if addresses.iter().any(|a| !self.permits(a.ip())) {
            return Err(not_public());
        }
        Ok(url)
    }
}

/// An `http(s)` address with a host and no credentials, query or fragment (which would take
/// over the path Sluice appends).
pub fn plain_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|_| "not an http(s) URL".to_owned())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("not an http(s) URL".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return Err("an address carries no credentials, query or fragment".to_owned());
    }
    if url.host().is_none() {
        return Err("the address names no host".to_owned());
    }
    Ok(url)
}

/// The address a URL's host writes literally, if it does.
pub fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

fn not_public() -> String {
    "the address is not a public one, and the deployment does not allow its network".to_owned()
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether `ip` is on the public internet: not loopback, private, link-local (the
/// instance metadata service), shared (CGNAT), documentation, benchmarking, multicast or
/// reserved — in IPv4 or any IPv6 form.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    // Global unicast only (2000::/3), less documentation (2001:db8::/32), the IETF's
    // protocol block with Teredo (2001::/23) and 6to4 (2002::/16), whose tunnels could
    // carry an inward IPv4 address.
    (segments[0] & 0xe000) == 0x2000
        && !(segments[0] == 0x2001 && segments[1] == 0x0db8)
        && !(segments[0] == 0x2001 && segments[1] < 0x0200)
        && segments[0] != 0x2002
}

/// The HTTP client's resolver: the system's answer, less every address the policy refuses.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver(pub &'static NetworkPolicy);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let permitted: Vec<SocketAddr> = resolved.filter(|address| policy.permits(address.ip())).collect();
            if permitted.is_empty() {
                tracing::warn!(host, "no permitted address for the host");
                return Err(Box::new(std::io::Error::other("no permitted address")) as _);
            }
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public_in_any_form() {
        for public in ["8.8.8.8", "52.94.236.248", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().expect("ip")), "{public}");
        }
        for inward in [
            "127.0.0.1",
            "127.0.0.53",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "192.0.0.170",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "2001:db8::1",
            "2001::1",
            "ff02::1",
        ] {
            assert!(!is_public(inward.parse().expect("ip")), "{inward}");
        }
    }

    #[test]
    fn a_tenants_address_is_refused_by_shape_and_by_network_unless_allow_listed() {
        let strict = NetworkPolicy::default();
        let local = NetworkPolicy::parse("127.0.0.0/8, 10.20.0.5").expect("policy");
        assert!(strict.check_url("https://api.example.com/v1").is_ok());
        assert!(strict.check_url("https://8.8.8.8/v1").is_ok());
        for bad in [
            "ftp://example.com/v1",
            "https://user:pw@example.com/v1",
            "https://example.com/v1?",
            "https://example.com/v1?x=1",
            "https://example.com/v1#frag",
            "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:169.254.169.254]/latest",
            "http://10.0.0.5:8080/v1",
            "http://0x7f000001/v1",
            "http://2130706433/v1",
            "not a url",
        ] {
            assert!(strict.check_url(bad).is_err(), "{bad}");
        }
        assert!(local.check_url("http://127.0.0.1:9001/v1").is_ok());
        assert!(local.check_url("http://10.20.0.5:8080/v1").is_ok());
        assert!(local.check_url("http://10.20.0.6:8080/v1").is_err());
        assert!(local.check_url("http://169.254.169.254/latest").is_err());
        assert!(NetworkPolicy::parse("10.0.0.0/8,nonsense").is_err());
        assert_eq!(NetworkPolicy::parse("").expect("empty"), NetworkPolicy::default());
    }

    #[tokio::test]
    async fn a_name_is_judged_by_every_address_it_resolves_to() {
        let strict = NetworkPolicy::default();
        let refused = strict.check_resolved("http://localhost:8080/v1").await;
        assert!(refused.is_err(), "{refused:?}");
        let local = NetworkPolicy::parse("127.0.0.0/8,::1").expect("policy");
        assert!(local.check_resolved("http://localhost:8080/v1").await.is_ok());
        assert!(strict.check_resolved("http://no-such-host.invalid/v1").await.is_err());
    }

    #[tokio::test]
    async fn the_client_connects_only_to_an_address_its_resolver_permits() {
        static STRICT: OnceLock<NetworkPolicy> = OnceLock::new();
        static LOOPBACK: OnceLock<NetworkPolicy> = OnceLock::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listener");
        let port = listener.local_addr().expect("address").port();
        let accepted = tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut count = 0;
            while let Ok(Ok((mut stream, _))) =
                tokio::time::timeout(std::time::Duration::from_secs(3), listener.accept()).await
            {
                count += 1;
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request).await;
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
            }
            count
        });
        crate::install_tls_provider();
        let client = |policy: &'static NetworkPolicy| {
            reqwest::Client::builder().no_proxy().dns_resolver(GuardedResolver(policy)).build().expect("client")
        };
        let url = format!("http://localhost:{port}/");
        let strict = client(STRICT.get_or_init(NetworkPolicy::default));
        assert!(strict.get(&url).send().await.is_err(), "a name that leads to loopback was connected to");
        let loopback = client(LOOPBACK.get_or_init(|| NetworkPolicy::parse("127.0.0.0/8,::1/128").expect("policy")));
        let answer = loopback.get(&url).send().await.expect("an allow-listed address is reached");
        assert_eq!(answer.status().as_u16(), 200);
        assert_eq!(accepted.await.expect("listener task"), 1, "only the permitted request reached the service");
    }
}
