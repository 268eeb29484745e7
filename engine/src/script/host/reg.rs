//! Registering a host function's overloads with its volatility (see the module above).

use rhai::{Engine, FuncRegistration, RhaiNativeFunc, Variant};

/// Where a host function registers its overloads: the engine, under the name of its table entry
/// (written once, so the reference and what scripts call cannot differ), with its volatility.
pub(super) struct Reg<'a> {
    pub engine: &'a mut Engine,
    pub name: &'static str,
    pub volatile: bool,
}

impl Reg<'_> {
    /// Registers one overload of the function.
    pub(super) fn register_fn<A: 'static, const N: usize, const X: bool, R: Variant + Clone, const F: bool>(
        &mut self,
        func: impl RhaiNativeFunc<A, N, X, R, F> + Send + Sync + 'static,
    ) -> &mut Self {
        FuncRegistration::new(self.name).with_volatility(self.volatile).register_into_engine(self.engine, func);
        self
    }
}
