//! The fake ECR endpoint. CONTRACT: the public signatures below are used by ecr-refresh's
//! tests; keep them (add to them freely). Bodies are to be implemented.

use std::time::SystemTime;

/// A fault as ECR sends it, for the next `count` calls (None: every call).
#[derive(Debug, Clone)]
pub enum EcrFault {
    /// 400 ThrottlingException, "Rate exceeded".
    Throttling,
    /// 400 AccessDeniedException, as for a principal without ecr:GetAuthorizationToken.
    AccessDenied,
    /// 400 ExpiredTokenException, "The security token included in the request is expired".
    ExpiredCredentials,
    /// 500 ServerException.
    ServerError,
    /// 200 with an authorizationToken that does not decode to `AWS:<password>`.
    MalformedToken,
}

/// A running fake ECR endpoint (awsJson1.1 GetAuthorizationToken). Dropping it stops it.
pub struct FakeEcr {/* private */}

impl FakeEcr {
    /// Caller account 123456789012; every region answers with password
    /// `pw-<region>-<n>` (n counts calls), expiring 12 hours from now, and proxyEndpoint
    /// `https://<account>.dkr.ecr.<region>.amazonaws.com` (account: the first registryId,
    /// or the caller's).
    pub fn start() -> FakeEcr {
        todo!()
    }
    /// `http://127.0.0.1:PORT` (for AWS_ENDPOINT_URL_ECR)
    pub fn url(&self) -> String {
        todo!()
    }
    /// Every later call in `region` answers this password.
    pub fn set_password(&self, region: &str, password: &str) {
        todo!()
    }
    /// Every later call answers this expiry.
    pub fn set_expires_at(&self, at: SystemTime) {
        todo!()
    }
    /// Every later call answers this proxyEndpoint (e.g. a local registry for login checks).
    pub fn set_proxy_endpoint(&self, endpoint: &str) {
        todo!()
    }
    pub fn add_fault(&self, fault: EcrFault, count: Option<usize>) {
        todo!()
    }
    /// Calls seen, with the region (from the SigV4 credential scope) and registryIds.
    pub fn calls(&self) -> Vec<(String, Vec<String>)> {
        todo!()
    }
    /// Every password this endpoint has handed out, to check none leaks into logs.
    pub fn passwords_issued(&self) -> Vec<String> {
        todo!()
    }
}
