// engine_probe: runs a JavaScript file against the transform engine's script (driver.js and the
// synchronous jsonata bundle, loaded as engine.cc loads them) in a bare SpiderMonkey 102
// context, for measurements the C++ API does not expose (bench/README.md, issue 16).
//
//   engine_probe <driver.js> <jsonata-sync.js> <probe.js> [gc PARAM VALUE | jit OPTION VALUE]...
//
// The probe sees `__d` (the driver: compile/evaluate/release), `__qbJsonata`, and:
//   print(x)            writes x and a newline to stdout
//   cpu()               this thread's CPU time, µs (CLOCK_THREAD_CPUTIME_ID)
//   gcparam(k[, v])     JS_GetGCParameter(k), after JS_SetGCParameter(k, v) when v is given
// `gc K V` and `jit K V` set a JSGCParamKey / JSJitCompilerOption (numbers) before loading.
// The context has the engine's settings except the nursery (SpiderMonkey's default unless set).
// Not a test and not built by CMake: bench/transform/probe/run.sh compiles it.
#include <js/CompilationAndEvaluation.h>
#include <js/Context.h>
#include <js/Conversions.h>
#include <js/GCAPI.h>
#include <js/GlobalObject.h>
#include <js/Initialization.h>
#include <js/PropertyAndElement.h>
#include <js/Realm.h>
#include <js/SourceText.h>
#include <js/String.h>
#include <jsapi.h>
#include <mozilla/Utf8.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string Read(const char* file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Print(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  JS::RootedString str(cx, JS::ToString(cx, args.get(0)));
  if (!str) return false;
  JS::UniqueChars chars = JS_EncodeStringToUTF8(cx, str);
  std::printf("%s\n", chars ? chars.get() : "?");
  std::fflush(stdout);
  args.rval().setUndefined();
  return true;
}

bool Cpu(JSContext*, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  args.rval().setDouble(static_cast<double>(ts.tv_sec) * 1e6 +
                        static_cast<double>(ts.tv_nsec) / 1e3);
  return true;
}

bool GcParam(JSContext* cx, unsigned argc, JS::Value* vp) {
  JS::CallArgs args = JS::CallArgsFromVp(argc, vp);
  const auto key = static_cast<JSGCParamKey>(args.get(0).toNumber());
  if (argc > 1) JS_SetGCParameter(cx, key, static_cast<uint32_t>(args.get(1).toNumber()));
  args.rval().setNumber(static_cast<double>(JS_GetGCParameter(cx, key)));
  return true;
}

const JSClass kGlobalClass = {
    "global", JSCLASS_GLOBAL_FLAGS, &JS::DefaultGlobalClassOps, nullptr, nullptr, nullptr};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (argc - 4) % 3 != 0) {
    std::fprintf(stderr,
                 "usage: engine_probe <driver.js> <jsonata-sync.js> <probe.js> "
                 "[gc|jit KEY VALUE]...\n");
    return 2;
  }
  if (!JS_Init()) return 1;
  JSContext* cx = JS_NewContext(128u << 20);  // the engine's default heap cap
  if (cx == nullptr) return 1;
  JS_SetNativeStackQuota(cx, 1u << 20);
  JS_SetGCParameter(cx, JSGC_ALLOCATION_THRESHOLD, 12);  // as engine.cc
  for (int i = 4; i + 2 < argc; i += 3) {
    const auto value = static_cast<uint32_t>(std::strtoul(argv[i + 2], nullptr, 10));
    const int key = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "jit") == 0) {
      JS_SetGlobalJitCompilerOption(cx, static_cast<JSJitCompilerOption>(key), value);
    } else {
      JS_SetGCParameter(cx, static_cast<JSGCParamKey>(key), value);
    }
  }
  if (!JS::InitSelfHostedCode(cx)) return 1;
  int status = 1;
  {
    JS::RealmOptions realm_options;
    JS::RootedObject global(
        cx, JS_NewGlobalObject(cx, &kGlobalClass, nullptr, JS::FireOnNewGlobalHook, realm_options));
    if (!global) return 1;
    JSAutoRealm realm(cx, global);
    if (!JS::InitRealmStandardClasses(cx) || !JS_DefineFunction(cx, global, "print", Print, 1, 0) ||
        !JS_DefineFunction(cx, global, "cpu", Cpu, 0, 0) ||
        !JS_DefineFunction(cx, global, "gcparam", GcParam, 2, 0)) {
      return 1;
    }
    const std::string source = "(function () {\n" + Read(argv[1]) + "\n" + Read(argv[2]) +
                               "\nvar __d = __qbMakeDriver(__qbJsonata);\n" + Read(argv[3]) +
                               "\n})()";
    JS::CompileOptions options(cx);
    options.setFileAndLine("probe.js", 1);
    JS::SourceText<mozilla::Utf8Unit> text;
    JS::RootedValue rval(cx);
    if (text.init(cx, source.data(), source.size(), JS::SourceOwnership::Borrowed) &&
        JS::Evaluate(cx, options, text, &rval)) {
      status = 0;
    } else {
      JS::RootedValue exc(cx);
      if (JS_GetPendingException(cx, &exc)) {
        JS_ClearPendingException(cx);
        JS::RootedString str(cx, JS::ToString(cx, exc));
        JS::UniqueChars chars = str ? JS_EncodeStringToUTF8(cx, str) : nullptr;
        std::fprintf(stderr, "probe threw: %s\n", chars ? chars.get() : "?");
      }
    }
  }
  JS_DestroyContext(cx);
  JS_ShutDown();
  return status;
}
