# SPDX-License-Identifier: MIT
# Install: libraries, public headers, tools, pkg-config files, CMake package
# (targets mscclpp::mscclpp and mscclpp::nccl, the latter from src/nccl).
include(CMakePackageConfigHelpers)
install(TARGETS mscclpp EXPORT mscclppTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mscclpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT mscclppTargets NAMESPACE mscclpp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mscclppConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mscclppConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mscclppConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mscclppConfig.cmake ${PROJECT_BINARY_DIR}/mscclppConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mscclpp)
# pkg-config: paths relative to ${pcfiledir} (lib/pkgconfig), so the file is
# right wherever `cmake --install --prefix` puts the tree.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(MSCCLPP_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(MSCCLPP_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" pc_up "${pc_up}")
  set(MSCCLPP_PC_PREFIX "\${pcfiledir}/${pc_up}")
  set(MSCCLPP_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(MSCCLPP_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(MSCCLPP_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/mscclpp.pc.in ${PROJECT_BINARY_DIR}/mscclpp.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/mscclpp_nccl.pc.in ${PROJECT_BINARY_DIR}/mscclpp_nccl.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mscclpp.pc ${PROJECT_BINARY_DIR}/mscclpp_nccl.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
