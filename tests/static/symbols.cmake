# symbols.cmake - fails when the static library defines a strong global symbol that the
# shared library does not export (the API): the static archive must offer what the shared
# library offers and nothing else (cmake/localize_hidden.cmake). Weak symbols (C++ inline
# functions, merged with a user's copies by design) are not counted.
# cmake -DNM=nm -DLIB=libtpla.a -DSHARED=libtpla.so -P symbols.cmake
cmake_minimum_required(VERSION 3.16) # IN_LIST
function(defined_names out)
  execute_process(COMMAND ${NM} ${ARGN} OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${ARGN} failed")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-fA-F]* [A-UX-Z] (.+)$") # strong: not W, V (weak), not lower case
      list(APPEND names "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()
defined_names(static -g --defined-only ${LIB})
defined_names(api -D --defined-only ${SHARED})
set(bad "")
foreach(name IN LISTS static)
  if(NOT name IN_LIST api)
    list(APPEND bad "${name}")
  endif()
endforeach()
list(LENGTH bad n)
if(n GREATER 0)
  message(FATAL_ERROR "${LIB} defines ${n} global symbols that ${SHARED} does not export: ${bad}")
endif()
list(LENGTH static count)
message(STATUS "${LIB}: ${count} global symbols, all exported by ${SHARED}")
