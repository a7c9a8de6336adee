// simdjson probe: how fast Debian's simdjson (On-Demand API) reads teamlog's op lines, for the parser
// decision in the README. Not part of the package build: tools/simdjson-probe/run.sh compiles and runs it
// beside teamlog's own parser on the same file.
//
// Each line is parsed and every field visited; strings (ids, names, member lists) are copied into
// std::string, as a shim handing ops to Swift would have to do. Numbers and booleans are read.
#include <simdjson.h>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace simdjson;

#define PROBE_STR2(x) #x
#define PROBE_STR(x) PROBE_STR2(x)

static size_t visit(ondemand::value v, std::vector<std::string> &out) {
  switch (v.type()) {
    case ondemand::json_type::object: {
      size_t n = 0;
      for (auto field : v.get_object()) {
        out.emplace_back(std::string_view(field.unescaped_key().value()));
        n += visit(field.value(), out) + 1;
      }
      return n;
    }
    case ondemand::json_type::array: {
      size_t n = 0;
      for (auto item : v.get_array()) n += visit(item.value(), out);
      return n;
    }
    case ondemand::json_type::string:
      out.emplace_back(std::string_view(v.get_string().value()));
      return 1;
    case ondemand::json_type::number:
      (void)v.get_number().value();
      return 1;
    case ondemand::json_type::boolean:
      (void)v.get_bool().value();
      return 1;
    case ondemand::json_type::null:
      (void)v.is_null();
      return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: probe FILE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::vector<padded_string> lines;
  std::string line;
  size_t bytes = 0;
  while (std::getline(in, line)) {
    bytes += line.size() + 1;
    lines.emplace_back(line);
  }
  ondemand::parser parser;
  std::vector<std::string> strings;
  size_t values = 0, failed = 0;
  auto start = std::chrono::steady_clock::now();
  for (auto &l : lines) {
    strings.clear();
    auto doc = parser.iterate(l);
    if (doc.error()) { failed++; continue; }
    ondemand::value root;
    if (doc.get_value().get(root)) { failed++; continue; }
    try {
      values += visit(root, strings);
    } catch (simdjson_error &) {
      failed++;
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("simdjson " PROBE_STR(SIMDJSON_VERSION) " (On-Demand, every field visited, strings copied): %zu lines in %.3f s = %.0f lines/s, "
         "%.1f MB/s (%zu values, %zu failed)\n",
         lines.size(), s, lines.size() / s, bytes / s / 1e6, values, failed);
  return 0;
}
