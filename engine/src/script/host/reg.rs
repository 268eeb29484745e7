//! Registering a host function's overloads with its volatility (see the module above).

use rhai::{Engine, FuncRegistration, RhaiNativeFunc, Variant};

/// Where a host function registers its overloads: the engine, with the function's volatility.
pub(super) struct Reg<'a> {
    pub engine: &'a mut Engine,
    pub volatile: bool,
}

impl Reg<'_> {
    pub fn register_fn<A: 'static, const N: usize, const X: bool, R: Variant + Clone, const F: bool>(
        &mut self,
        name: &str,
        func: impl RhaiNativeFunc<A, N, X, R, F> + Send + Sync + 'static,
    ) -> &mut Self {
        FuncRegistration::new(name).with_volatility(self.volatile).register_into_engine(self.engine, func);
        self
    }
}
